"""How a server process died: the one table of crash signals, for the live path and the log parser alike.

A process that dies by a signal leaves no words of its own; whoever
watched it says which signal, each in its own way: Python's ``Popen`` a
negative return code, a shell or docker ``128 + n``, bash ``Illegal
instruction (core dumped)``, Go (Ollama) ``signal: illegal instruction``,
systemd ``status=4/ILL``, the kernel ``trap invalid opcode`` or ``Out of
memory: Killed process``. Every one of them ends up as one entry of
:data:`SIGNALS`, so a crash reads the same whether cardproof saw it happen
or read it in someone's log. ``meaning`` is an English message id of the
report's catalogue (report/locale): pages say it in their language.

``loads.end_reason`` says a crash as ``crashed: <key>`` (:func:`end_reason`),
a closed vocabulary the report reads back (:func:`from_end_reason`); the
load's ``exit_status`` keeps the signal as Python does, ``-n``.

Nothing here imports from the rest of cardproof: the parser, the runner and
the report may all use it.

In short, ``crashes.py``: the one table of crash signals (SIGILL, SIGABRT, SIGBUS,
SIGFPE, SIGKILL, SIGSEGV, and the kernel's OOM kill), each with what it usually means (an English
message id; German in the ``.po``), read from a ``Popen`` return code (``-n``), a shell's or
docker's exit code (``128 + n``), a Windows exception code (NTSTATUS, in hex or as a signed or
unsigned number: ``0xc000001d`` SIGILL, ``0xc0000005``/``0xc00000fd`` SIGSEGV, ``0xc0000006``
SIGBUS, ``0xc0000094`` SIGFPE, ``0xc0000409``, what ``abort()`` ends a process with, SIGABRT) or a
name (glibc's English, German and Chinese words, Go's). The log parser ``logs/parsers/crash.py``
turns the field's shapes into a ``crash_signal`` fact (bash ``Illegal instruction (core dumped)``,
padded before the command or after a start script's ``line 3: 10 `` or a job's ``[1]+ ``, zsh, fish,
gdb, Python's ``<Signals.SIGILL: 4>``, Go's ``signal: illegal instruction`` (Ollama, llama-swap;
also cut short by journalctl's pager, ``signal: illegal ins>``), Go's runtime dying in C code
(``SIGILL: illegal instruction`` before ``PC=``, on Windows ``Exception 0xc000001d ...``), Rust's
``ExitStatus(3221225501)`` (Jan), compose's ``exited with code 132``, systemd's ``status=4/ILL`` and
``Failed with result 'oom-kill'``, the kernel's ``trap invalid opcode`` / ``segfault at`` / ``Out of
memory: Killed process``, ``GGML_ASSERT``, GGML_ABORT's ``file:line: fatal error``, ``ggml_abort``
in a backtrace, the C++ runtime's ``terminate called after throwing ...``; words that only start a
sentence, ``HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION`` or Windows' DLL errors
``0xc0000135``/``0xc0000139`` are none); a crash line attributed to a load ends it, and so does a
kernel line on its own stream that names the load's PID (``Out of memory: Killed process 4242
(llama-server)``, ``llama-server[4242]: segfault at``, ``traps: … trap invalid opcode``; the line
joins that load, attributed by ``pid``) (``loads.end_reason`` ``crashed: SIGILL``, ``exit_status``
``-4``, failed when it was never ready; an assert or CUDA error named first stays the reason) and a
log's crash wins over the runner's "run ended" when the loads are linked. The router reaps its
children with sheredom's subprocess.h, which reports every death by a signal as status 1: an unasked
non-zero ``exited with status`` of a child that said no last words is ``crashed: exited unasked with
status 1``, and the runner asks ``/models`` (``Backend.process_exit``) after each failed request, so
the death is said when it happens, never which signal. ``cardproof loads``, the end-of-run lines,
the article's Exceptions (``logs.summary.crashed_loads``: a run's loads and the loads that own its
lines) and a log's page (its Crashes, in a load or not) all say the signal with its meaning
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from cardproof.marks import N_


@dataclass(frozen=True)
class CrashSignal:
    """One way a process dies: ``key`` as stored (a signal name, or ``OOM``), its number, what it usually means."""

    key: str
    number: int
    meaning: str

    def describe(self) -> str:
        """``SIGILL (illegal instruction: ...)``: what the CLI prints."""
        return f"{self.key} ({self.meaning})"


def _table(*entries: CrashSignal) -> dict[str, CrashSignal]:
    return {e.key: e for e in entries}


#: The signals a server dies of, and what each usually means for a llama.cpp or Ollama server.
#: SIGTERM/SIGINT are left out on purpose: they are how a server is stopped, not how it crashes.
SIGNALS = _table(
    CrashSignal("SIGILL", 4, N_("illegal instruction: the binary uses CPU features this machine does not allow")),
    CrashSignal("SIGABRT", 6, N_("aborted: the server stopped itself on a failed check such as GGML_ASSERT or ggml_abort")),
    CrashSignal("SIGBUS", 7, N_("bus error: mapped memory could not be read, often a model file that changed, "
                                "was cut short or sits on a failing disk")),
    CrashSignal("SIGFPE", 8, N_("arithmetic error: a division by zero or a similar fault in the server")),
    CrashSignal("SIGKILL", 9, N_("killed: ended from outside without a chance to clean up, by the out-of-memory "
                                 "killer, a supervisor's timeout or kill -9")),
    CrashSignal("SIGSEGV", 11, N_("segmentation fault: the server touched memory it does not own, a bug in the "
                                  "server, a backend or a driver")),
    # the kernel's OOM killer sends SIGKILL; where its own line says so, the cause is known
    CrashSignal("OOM", 9, N_("killed by the kernel's out-of-memory killer: the machine ran out of memory")),
)
_BY_NUMBER = {s.number: s for s in SIGNALS.values() if s.key != "OOM"}
#: Windows reports a crash as an NTSTATUS exit code (Ollama: ``exit status 0xc000001d``, Go's runtime
#: ``Exception 0xc000001d ...``): the exceptions that a signal stands for on Linux. ``0xc0000409`` is what
#: ``abort()`` ends a process with (the C runtime's ``__fastfail``: GGML_ASSERT, ``std::terminate``)
_NTSTATUS = {
    0xC000001D: SIGNALS["SIGILL"],  # STATUS_ILLEGAL_INSTRUCTION
    0xC0000005: SIGNALS["SIGSEGV"],  # STATUS_ACCESS_VIOLATION
    0xC00000FD: SIGNALS["SIGSEGV"],  # STATUS_STACK_OVERFLOW (a SIGSEGV on Linux)
    0xC0000006: SIGNALS["SIGBUS"],  # STATUS_IN_PAGE_ERROR: a mapped file could not be read
    0xC0000094: SIGNALS["SIGFPE"],  # STATUS_INTEGER_DIVIDE_BY_ZERO
    0xC0000409: SIGNALS["SIGABRT"],  # STATUS_STACK_BUFFER_OVERRUN, raised by abort()
}
#: the words of strsignal(3) (bash, sh), zsh and Go's ``signal:`` for each signal, lower case
_WORDS = {
    "illegal instruction": "SIGILL", "illegal hardware instruction": "SIGILL",
    "aborted": "SIGABRT", "abort": "SIGABRT",
    "bus error": "SIGBUS",
    "floating point exception": "SIGFPE",
    "killed": "SIGKILL",
    "segmentation fault": "SIGSEGV",
    # Go's runtime (``SIGSEGV: segmentation violation``, ``SIGFPE: floating-point exception``)
    "segmentation violation": "SIGSEGV", "floating-point exception": "SIGFPE",
    # glibc's strsignal(3) in the two languages most published logs come in besides English
    "ungültiger maschinenbefehl": "SIGILL", "speicherzugriffsfehler": "SIGSEGV", "abgebrochen": "SIGABRT",
    "bus-zugriffsfehler": "SIGBUS", "gleitkomma-ausnahme": "SIGFPE",
    "非法指令": "SIGILL", "段错误": "SIGSEGV", "已放弃": "SIGABRT", "总线错误": "SIGBUS", "浮点数例外": "SIGFPE",
}


def by_number(n: int | None) -> CrashSignal | None:
    return _BY_NUMBER.get(n) if n is not None else None


def by_name(name: str | None) -> CrashSignal | None:
    """``SIGILL``, ``ILL`` (systemd) or the words a shell or Go prints (``Illegal instruction``)."""
    if not name:
        return None
    text = name.strip()
    upper = text.upper()
    if upper in SIGNALS:
        return SIGNALS[upper]
    if "SIG" + upper in SIGNALS:
        return SIGNALS["SIG" + upper]
    key = _WORDS.get(text.lower())
    return SIGNALS[key] if key else None


def from_returncode(rc: int | None) -> CrashSignal | None:
    """Python's ``Popen.returncode``: ``-n`` when signal n ended the child."""
    return by_number(-rc) if rc is not None and rc < 0 else None


def from_exit_code(code: int | None) -> CrashSignal | None:
    """An exit code as a shell or docker reports it: ``128 + n`` for signal n, or a Windows NTSTATUS."""
    if code is None:
        return None
    if (code & 0xFFFFFFFF) in _NTSTATUS:  # also as a signed 32-bit number (-1073741795) or unsigned (3221225501)
        return _NTSTATUS[code & 0xFFFFFFFF]
    return by_number(code - 128) if 128 < code < 160 else None


def end_reason(sig: CrashSignal) -> str:
    """``loads.end_reason`` of a load whose process died by ``sig``."""
    return f"crashed: {sig.key}"


_END = re.compile(r"crashed: ([A-Z]{3,7})")


def from_end_reason(text: str | None) -> CrashSignal | None:
    """The signal a stored ``end_reason`` names, or None (another ending, or a crash named otherwise)."""
    m = _END.fullmatch(text or "")
    return SIGNALS.get(m[1]) if m else None


#: ``loads.end_reason`` of a router child that ended on its own with a failing status: llama-server's
#: router reaps its children with sheredom's subprocess.h, which reports any death by a signal as
#: EXIT_FAILURE (1), so the log and ``/models`` say "status 1" and never which signal
ROUTER_DIED = "crashed: exited unasked with status {status}"
_ROUTER_DIED = re.compile(r"crashed: exited unasked with status (-?\d{1,6})")


def router_died(status: int) -> str:
    return ROUTER_DIED.format(status=status)


def is_crash(end_reason_text: str | None) -> bool:
    """Whether a stored ``end_reason`` says the process crashed (by a named signal, an assert, a CUDA error ...)."""
    return bool(end_reason_text) and str(end_reason_text).startswith("crashed: ")


def describe_end(text: str | None) -> str | None:
    """The English a CLI line prints for a crash's ``end_reason`` (with the signal's meaning); None for no crash."""
    if not is_crash(text):
        return None
    sig = from_end_reason(text)
    if sig is not None:
        return f"crashed: {sig.describe()}"
    m = _ROUTER_DIED.fullmatch(text or "")
    if m:
        return (f"crashed: exited unasked with status {m[1]} (the router reports any signal as status 1: "
                f"which one is not known)")
    return str(text)
