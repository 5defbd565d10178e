"""``crash_signal``: a line saying a server process died by a signal, in the words of whoever watched it.

The dying process prints nothing; its parent, supervisor or kernel does,
each in its own shape (all read from published logs, see
tests/test_logs_crash.py):

* a shell -- bash ``Illegal instruction (core dumped)``, in a script
  ``/start.sh: line 3: 10 Illegal instruction (core dumped) /llm/llama-server "$@"``;
  zsh ``[1]    3804384 segmentation fault (core dumped)``; fish
  ``terminated by signal SIGILL``; gdb ``received signal SIGILL, Illegal instruction.``
* Go's os/exec (Ollama, docker model-runner) -- ``signal: illegal instruction (core dumped)``,
  and on Windows ``exit status 0xc000001d``
* docker -- ``exited with code 132`` (compose), ``Exited (139)``; systemd -- ``code=killed, status=4/ILL``
* the kernel -- ``traps: llama-server[13200] trap invalid opcode``, ``segfault at``,
  ``Out of memory: Killed process 1234 (llama-server)``
* ggml itself -- ``GGML_ASSERT(...) failed`` and ``ggml_abort`` in a backtrace: it aborts right after

The value is the signal's key in :data:`cardproof.daemon.crashes.SIGNALS`
(``SIGILL`` ..., ``OOM``) with its number; what it means is the table's.
"""

from __future__ import annotations

import re

from ...crashes import CrashSignal, SIGNALS, by_name, from_exit_code
from . import Fact, parser

# strsignal(3) words at the start of a line, alone or after a script's "NAME: line N: PID " (bash, sh)
_SHELL = re.compile(r"(?:\S.*?: line \d+: +\d+ +)?(Illegal instruction|Segmentation fault|Bus error|Aborted"
                    r"|Floating point exception|Killed(?! process))(?: +\(core dumped\))?(?:\s|$)")
# zsh: "zsh: segmentation fault  ./main", a job's "[1]    3804384 segmentation fault (core dumped)"
_ZSH = re.compile(r"(?:zsh: |\[\d+\]\s+(?:[+-]\s+)?\d+ +)(illegal hardware instruction|segmentation fault|bus error"
                  r"|abort|killed|floating point exception)\b")
# Go's ExitError text; "killed" only where the runner died while Ollama waited for it (Ollama kills its
# own runners with SIGKILL on every unload, and may say so)
_GO = re.compile(r"signal: (illegal instruction|segmentation fault|bus error|aborted|floating point exception"
                 r"|(?<=has terminated: signal: )killed)\b")
_NAMED = re.compile(r"(?:terminated by|received) signal (SIG[A-Z]+)\b")  # fish, gdb, llamafile
_SYSTEMD = re.compile(r"code=(?:killed|dumped), status=\d+/([A-Z]+)\b")
_EXIT_CODE = re.compile(r"(?:exited with code |\b[Ee]xited \(|\bEXITED \(|\bexit status )(0x[0-9a-fA-F]{8}|\d{1,5})\b")
_OOM = re.compile(r"[Oo]ut of memory: Kill(?:ed)? process \d+ ")
_KERNEL = (("trap invalid opcode", "SIGILL"), ("trap divide error", "SIGFPE"), ("] segfault at ", "SIGSEGV"),
           (": segfault at ", "SIGSEGV"), ("general protection fault ip:", "SIGSEGV"))
_GGML = re.compile(r"GGML_ASSERT\(.*\) failed|\(ggml_abort\+0x")


def crash_of(text: str) -> CrashSignal | None:
    """The signal one clean line says a process died of, or None."""
    m = _SHELL.match(text)
    if m:
        return by_name(m[1])
    m = _ZSH.match(text)
    if m:
        return by_name(m[1])
    if "signal" in text:
        m = _GO.search(text)
        if m:
            return by_name(m[1])
        m = _NAMED.search(text)
        if m:
            return by_name(m[1])
    if "status=" in text:
        m = _SYSTEMD.search(text)
        if m:
            return by_name(m[1])
    if "xit" in text or "XIT" in text:
        m = _EXIT_CODE.search(text)
        if m:
            return from_exit_code(int(m[1], 16) if m[1].startswith("0x") else int(m[1]))
    if "of memory" in text and _OOM.search(text):
        return SIGNALS["OOM"]
    for words, key in _KERNEL:
        if words in text:
            return SIGNALS[key]
    if "GGML_ASSERT" in text or "ggml_abort" in text:
        if _GGML.search(text):
            return SIGNALS["SIGABRT"]
    return None


@parser("Illegal instruction", "Segmentation fault", "Bus error", "Aborted", "Floating point exception", "Killed",
        "hardware instruction", "segmentation fault", "bus error", "abort", "killed", "floating point exception",
        "signal: ", "signal SIG", "code=killed", "code=dumped", "exited with code", "xited (", "XITED (",
        "exit status ", "trap invalid opcode", "trap divide error", "segfault at", "general protection fault",
        "of memory: Kill", "GGML_ASSERT(")
def parse_crash(text: str) -> list[Fact]:
    """value_text: the signal's key (``SIGILL``); value_num: its number."""
    sig = crash_of(text)
    return [Fact("crash_signal", float(sig.number), sig.key)] if sig else []
