"""``crash_signal``: a line saying a server process died by a signal, in the words of whoever watched it.

The dying process prints nothing; its parent, supervisor or kernel does,
each in its own shape (all read from published logs, see
tests/test_logs_crash.py):

* a shell -- bash ``Illegal instruction (core dumped)``, in a script
  ``/start.sh: line 3: 10 Illegal instruction (core dumped) /llm/llama-server "$@"``, a job's
  ``[1]+  Killed ...``, in German or Chinese (``非法指令 (核心已转储)``); zsh
  ``[1]    3804384 segmentation fault (core dumped)``; fish ``terminated by signal SIGILL``;
  gdb ``received signal SIGILL, Illegal instruction.``; Python ``died with <Signals.SIGILL: 4>``
* Go's os/exec (Ollama, llama-swap, docker model-runner) -- ``signal: illegal instruction (core dumped)``
  (also cut short by journalctl: ``signal: illegal ins>``), and on Windows ``exit status 0xc000001d``;
  Rust (Jan) ``ExitStatus(ExitStatus(3221225501))``
* Go's runtime dying in C code (Ollama's runner) -- ``SIGILL: illegal instruction`` / ``SIGABRT: abort``
  before ``PC=``; on Windows ``Exception 0xc000001d 0x0 0x0 0x7ff8729a99dd``
* docker -- ``exited with code 132`` (compose), ``Exited (139)``; systemd -- ``code=killed, status=4/ILL``,
  ``Failed with result 'oom-kill'``
* the kernel -- ``traps: llama-server[13200] trap invalid opcode``, ``segfault at``,
  ``Out of memory: Killed process 1234 (llama-server)``; it writes on a stream of its own, and the PID
  it names (:func:`crash_pid`) ties the line to that process's load (daemon/logs/importer.py)
* ggml and the C++ runtime -- ``GGML_ASSERT(...) failed``, ``file.cu:4254: fatal error``, ``ggml_abort``
  in a backtrace, ``terminate called after throwing an instance of ...``: it aborts right after

Windows' exception codes stand for the signal they are on Linux (``0xc0000409``, what ``abort()``
ends a process with, for SIGABRT): :data:`cardproof.daemon.store.crashes._NTSTATUS`. A line only
mentioning the words (prose starting "Illegal instruction errors ...", ``HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION``,
a model named so) is none.

The value is the signal's key in :data:`cardproof.daemon.store.crashes.SIGNALS`
(``SIGILL`` ..., ``OOM``) with its number; what it means is the table's.
"""

from __future__ import annotations

import re

from cardproof.daemon.store.crashes import CrashSignal, SIGNALS, by_name, from_exit_code
from .base import Fact, LineParsers

PARSER = LineParsers("crash")

# strsignal(3) words (glibc's English, German or Chinese) at the start of a line: alone, padded before the
# command (bash: "Illegal instruction        (core dumped) .lmstudio/bin/lms"), after a script's
# "NAME: line N: PID " (bash, sh) or a job's "[1]+  " -- never the words starting a sentence of prose
_STRSIGNAL = (r"Illegal instruction|Segmentation fault|Bus error|Aborted|Floating point exception|Killed(?! process)"
              r"|Ungültiger Maschinenbefehl|Speicherzugriffsfehler|Abgebrochen|Bus-Zugriffsfehler"
              r"|Gleitkomma-Ausnahme|非法指令|段错误|已放弃|总线错误|浮点数例外")
_CORE = r"(?:\(core dumped\)|\(Speicherabzug geschrieben\)|\(核心已转储\))"
_SHELL = re.compile(r"(?:(?:\S.*?: line \d+: +\d+|\[\d+\][+-]?) +(" + _STRSIGNAL + r")(?:\s|$)"
                    r"|(" + _STRSIGNAL + r")(?: *" + _CORE + r"(?: .*)?| {2,}\S.*)?\s*$)")
# zsh: "zsh: segmentation fault  ./main", a job's "[1]    3804384 segmentation fault (core dumped)"
_ZSH = re.compile(r"(?:zsh: |\[\d+\]\s+(?:[+-]\s+)?\d+ +)(illegal hardware instruction|segmentation fault|bus error"
                  r"|abort|killed|floating point exception)\b")
# Go's ExitError text; "killed" only where the runner died while Ollama waited for it (Ollama kills its
# own runners with SIGKILL on every unload, and may say so)
_GO = re.compile(r"signal: (illegal instruction|segmentation fault|bus error|aborted|floating point exception"
                 r"|(?<=has terminated: signal: )killed)\b")
# the same cut short by journalctl's pager, which ends a line that does not fit with ">":
# "llama runner exited with error: signal: illegal ins>"
_GO_CUT = re.compile(r"signal: ([a-z][a-z ]{2,})>$")
_GO_WORDS = ("illegal instruction", "segmentation fault", "bus error", "aborted", "floating point exception")
# Go's runtime when a signal arrives in C code (Ollama's runner: "SIGILL: illegal instruction", then
# "PC=0x... m=4 sigcode=2" and "signal arrived during cgo execution"), or in Go code ("[signal SIGSEGV:
# segmentation violation code=0x1 addr=0x0 pc=0x...]" after "panic:" or "fatal error:")
_GO_PANIC = re.compile(r"\[?(?:signal )?(SIG(?:ILL|SEGV|BUS|ABRT|FPE)): (?:illegal instruction|segmentation violation"
                       r"|bus error|abort|floating-point exception)(?: |$)")
# fish, gdb, llamafile, Python's subprocess ("died with <Signals.SIGILL: 4>"), cargo and Rust
# ("signal: 4, SIGILL: illegal instruction", "signal: 4 (SIGILL)"), cosmopolitan ("Uncaught SIGABRT (SI_TKILL)")
_NAMED = re.compile(r"(?:(?:terminated by|received|killed by) signal |<Signals\.|signal: \d+,? \(?|Uncaught )"
                    r"(SIG[A-Z]+)\b")
_SYSTEMD = re.compile(r"code=(?:killed|dumped), status=\d+/([A-Z]+)\b")
# an exit code: 128 + n, or a Windows NTSTATUS in hex or as a signed (-1073741795) or unsigned (3221225501)
# 32-bit number; Rust's ExitStatus as Jan prints it: "Process exited with code ExitStatus(ExitStatus(3221225501))"
_EXIT_CODE = re.compile(r"(?:exited with code |\b[Ee]xited \(|\bEXITED \(|\bexit status |\bExitStatus\()"
                        r"(?:ExitStatus\()?(0x[0-9a-fA-F]{8}|-?\d{1,10})\b")
# Go's runtime on Windows: "Exception 0xc000001d 0x0 0x0 0x7ff8729a99dd" (then "PC=" and "signal arrived
# during external code execution"); Windows' own event: "Exception code: 0xc0000005"
_NT_EXCEPTION = re.compile(r"Exception (?:code: )?(0x[0-9a-fA-F]{8})\b")
_OOM = re.compile(r"[Oo]ut of memory: Kill(?:ed)? process \d+ ")
# systemd's words when the kernel's OOM killer took a process of a unit (journald, ``systemctl status``)
_SYSTEMD_OOM = ("Failed with result 'oom-kill'", "A process of this unit has been killed by the OOM killer")
_KERNEL = (("trap invalid opcode", "SIGILL"), ("trap divide error", "SIGFPE"), ("] segfault at ", "SIGSEGV"),
           (": segfault at ", "SIGSEGV"), ("general protection fault ip:", "SIGSEGV"))
# ggml and the C++ runtime abort right after these: a failed assert, GGML_ABORT's "file:line: fatal error",
# ggml_abort or ggml's terminate handler in a backtrace (glibc's "(ggml_abort+0x152)", gdb's "in ggml_abort ()"),
# libstdc++'s and libc++'s words on an uncaught exception
_GGML = re.compile(r"GGML_ASSERT\(.{0,1000}?\) failed|\(ggml_abort\+0x|\bin ggml_(?:abort|uncaught_exception\(\)) \("
                   r"|^\S+\.(?:c|cc|cpp|cu|cuh|h|hpp|m|mm):\d+: fatal error\s*$")
_TERMINATE = re.compile(r"terminate called (?:after throwing an instance of |without an active exception|recursively)"
                        r"|libc\+\+abi: terminating")


def crash_of(text: str) -> CrashSignal | None:
    """The signal one clean line says a process died of, or None."""
    m = _SHELL.match(text)
    if m:
        return by_name(m[1] or m[2])
    m = _ZSH.match(text)
    if m:
        return by_name(m[1])
    if "SIG" in text:
        m = _GO_PANIC.match(text)
        if m:
            return by_name(m[1])
    if "signal" in text or "Signals." in text or "Uncaught SIG" in text:
        m = _GO.search(text)
        if m:
            return by_name(m[1])
        m = _NAMED.search(text)
        if m:
            return by_name(m[1])
        if text.endswith(">"):
            m = _GO_CUT.search(text)
            if m:
                words = [w for w in _GO_WORDS if w.startswith(m[1])]
                if len(words) == 1:
                    return by_name(words[0])
    if "status=" in text:
        m = _SYSTEMD.search(text)
        if m:
            return by_name(m[1])
    if "xit" in text or "XIT" in text:
        m = _EXIT_CODE.search(text)
        if m:
            return from_exit_code(int(m[1], 16) if m[1].startswith("0x") else int(m[1]))
    if "Exception " in text:
        m = _NT_EXCEPTION.match(text)
        if m:
            return from_exit_code(int(m[1], 16))
    if "of memory" in text and _OOM.search(text):
        return SIGNALS["OOM"]
    if "OOM killer" in text or "oom-kill" in text:
        if any(words in text for words in _SYSTEMD_OOM):
            return SIGNALS["OOM"]
    for words, key in _KERNEL:
        if words in text:
            return SIGNALS[key]
    if "GGML_ASSERT" in text or "ggml_" in text or "fatal error" in text:
        if _GGML.search(text):
            return SIGNALS["SIGABRT"]
    if "terminat" in text and _TERMINATE.match(text):
        return SIGNALS["SIGABRT"]
    return None


# the kernel names the process it killed or trapped: its PID ties the line to that process's load
_NAMED_PID = re.compile(r"(?:[Kk]illed process (\d{1,7}) \(|\S\[(\d{1,7})\]:? (?:trap |segfault at |general protection))")


def crash_pid(text: str) -> int | None:
    """The PID a kernel crash line names (``Out of memory: Killed process 4242 (llama-server)``,
    ``traps: llama-server[13200] trap invalid opcode``, ``llama-server[13200]: segfault at 0``), or None."""
    m = _NAMED_PID.search(text)
    return int(m[1] or m[2]) if m else None


@PARSER.on("Illegal instruction", "Segmentation fault", "Bus error", "Aborted", "Floating point exception", "Killed",
        "hardware instruction", "segmentation fault", "bus error", "abort", "killed", "floating point exception",
        "Maschinenbefehl", "Speicherzugriffsfehler", "Abgebrochen", "Bus-Zugriffsfehler", "Gleitkomma-Ausnahme",
        "非法指令", "段错误", "已放弃", "总线错误", "浮点数例外",
        "signal: ", "signal SIG", "Signals.", "Uncaught SIG", "SIGILL: ", "SIGSEGV: ", "SIGBUS: ", "SIGABRT: ",
        "SIGFPE: ", "code=killed", "code=dumped", "exited with code", "xited (", "XITED (", "exit status ",
        "ExitStatus(", "Exception ", "trap invalid opcode", "trap divide error", "segfault at",
        "general protection fault", "of memory: Kill", "oom-kill", "OOM killer", "GGML_ASSERT(", "ggml_abort",
        "ggml_uncaught_exception", ": fatal error", "terminate called", "libc++abi: terminating")
def parse_crash(text: str) -> list[Fact]:
    """value_text: the signal's key (``SIGILL``); value_num: its number."""
    sig = crash_of(text)
    return [Fact("crash_signal", float(sig.number), sig.key)] if sig else []
