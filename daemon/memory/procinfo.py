"""Processes as /proc sees them: names, PID-namespace checks, who listens on a port.

Process tables (listening sockets, command lines, children) come from psutil.
:class:`ProcResolver` reads /proc itself, for a measured reason: psutil's
``open_files()`` lists regular files only, and the GPU device files
(``/dev/nvidia*``, character devices) that prove a CUDA context are exactly
what it must see; ``name()`` may also replace the kernel's 15-character
``comm`` with a guess from the command line, and the stored names are comm.

The NVIDIA driver does not know PID namespaces: inside a container it reports
host PIDs (NVIDIA/nvidia-docker#1483, NVIDIA/gpu-monitoring-tools#63). A PID
from NVML is therefore checked against /proc before it is named, and one that
does not belong here is recorded as such, never matched by number alone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

# Every process with a CUDA context holds these open (nvidiactl, nvidia0,
# nvidia-uvm); a process that holds none of them is not using the card.
NVIDIA_DEVICE_PREFIXES = ("/dev/nvidia",)


class ProcResolver:
    """Names and namespace status of PIDs, cached briefly so 10 Hz stays cheap.

    ``device_prefixes`` are the file paths that prove a process uses the card;
    the recorded-reading tests point it at a file their stand-in process holds.
    """

    def __init__(self, proc: str | Path = "/proc", device_prefixes=NVIDIA_DEVICE_PREFIXES, ttl_s: float = 5.0):
        self.proc = Path(proc)
        self.device_prefixes = tuple(str(p) for p in device_prefixes)
        self.ttl_s = ttl_s
        self._cache: dict[int, tuple[float, str | None, str, str | None]] = {}

    def describe(self, pid: int) -> tuple[str | None, str, str | None]:
        """``(name, pid_status, reason)`` for a PID reported by the driver."""
        now = time.monotonic()
        hit = self._cache.get(pid)
        if hit and now - hit[0] < self.ttl_s:
            return hit[1], hit[2], hit[3]
        result = self._describe(pid)
        self._cache[pid] = (now, *result)
        return result

    def _describe(self, pid: int) -> tuple[str | None, str, str | None]:
        base = self.proc / str(pid)
        try:
            name = (base / "comm").read_text().strip()
        except FileNotFoundError:
            return None, "foreign", "no such PID in this PID namespace (the driver reports host PIDs)"
        except OSError as exc:
            return None, "local_unverified", f"/proc/{pid}/comm unreadable: {exc.strerror}"
        holds = self._holds_device_file(base)
        if holds is None:
            return name, "local_unverified", "open files unreadable; PID exists here"
        if not holds:
            return (
                None,
                "mismatch",
                f"local PID {pid} ({name}) holds no GPU device file: the driver's PID is from another namespace",
            )
        return name, "local", None

    def _holds_device_file(self, base: Path) -> bool | None:
        try:
            fds = os.listdir(base / "fd")
        except OSError:
            return None
        readable = False
        for fd in fds:
            try:
                target = os.readlink(base / "fd" / fd)
            except OSError:
                continue
            readable = True
            if target.startswith(self.device_prefixes):
                return True
        return False if readable or not fds else None


def listening_pids(port: int) -> list[int]:
    """PIDs holding a listening TCP socket on ``port`` (router child, Ollama runner).

    psutil reads the socket tables and each process's fd table: exact, no
    guessing from command lines. Processes whose fds we may not read are not
    found (psutil gives them no pid).
    """
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return []
    return sorted({c.pid for c in conns
                   if c.pid and c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port})


def pids_with_arg(text: str) -> list[int]:
    """PIDs whose command line has an argument equal to ``text`` or ending in it.

    For Ollama: each runner is started with ``--model <blob path>``; the blob
    (sha256-<digest>) names the model, so one runner is found, not all of them.
    """
    found = []
    for p in psutil.process_iter(["cmdline"]):
        args = p.info.get("cmdline") or []  # None where it may not be read
        if any(a == text or a.endswith("/" + text) for a in args if a):
            found.append(p.pid)
    return sorted(found)


def children(pid: int) -> list[int]:
    """Direct and indirect children of ``pid``; none when it is gone."""
    try:
        return sorted(c.pid for c in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def server_pids(*, pid: int | None = None, port: int | None = None, arg: str | None = None,
                include_children: bool = False) -> tuple[list[int], str]:
    """The processes of one server instance and how they were found.

    The port wins: in router mode the router's own PID would also cover every
    other child, i.e. the neighbours. ``arg`` finds a runner by an argument of
    its command line (the Ollama model blob). ``include_children`` adds the
    children of what was found.
    """
    pids: list[int] = []
    how = "none"
    if port:
        pids = listening_pids(port)
        how = "port" if pids else how
    if not pids and arg:
        pids = pids_with_arg(arg)
        how = "arg" if pids else how
    if not pids and pid:
        pids, how = [pid], "pid"
    if include_children:
        for p in list(pids):
            pids.extend(children(p))
        how += "+children"
    return sorted(set(pids)), how
