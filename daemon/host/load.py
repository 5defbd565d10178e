"""CPU time on this machine around a cell: the whole machine's, the server's process tree's, cardproof's own.

A CPU-only or unified-memory server shares its cores (and memory bandwidth)
with every other process on the machine: a compile or a browser beside it is
what a foreign process on a card is to a GPU server. The cell checks
(``cellchecks.snapshot``) store one :func:`reading` before and one after each
cell (check ``host_cpu``); :func:`foreign_cores` turns two of them into the
CPU time of everything else, as a share of one core over the cell's wall
time, which the ``busy_host`` gate judges and the article states.

Readings come from psutil: ``/proc/stat`` for the machine (user, nice, system,
irq, softirq and steal, the time the hypervisor gave to other machines) and
each process's own counters. The server is found as the process listening on
the campaign's port (a local URL only), with all its children; the router's
reaped children count through its ``children_user``/``children_system``.
cardproof's own time is its process alone (every thread), not its children: a
server or a hog it started is a process of its own.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlparse

import psutil

from cardproof.daemon.memory.procinfo import children, listening_pids

_LOCAL = ("127.0.0.1", "localhost", "::1")
#: the machine's CPU time that is work, in psutil's ``cpu_times`` (guest time is inside user time already)
_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


def server_roots(url: str) -> list[int]:
    """The processes listening on ``url``'s port on this machine; none for a server elsewhere."""
    parsed = urlparse(url)
    if parsed.hostname not in _LOCAL or not parsed.port:
        return []
    return listening_pids(parsed.port)


def _process_seconds(pid: int, *, reaped: bool) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return t.user + t.system + ((t.children_user + t.children_system) if reaped else 0.0)


def reading(url: str) -> dict:
    """CPU seconds used so far by the machine, the server's processes and cardproof, with the load average."""
    cpu = psutil.cpu_times()
    roots = server_roots(url)
    server: dict[str, float] = {}
    for root in roots:
        for pid in (root, *children(root)):
            seconds = _process_seconds(pid, reaped=True)
            if seconds is not None:
                server[str(pid)] = seconds
    return {
        "monotonic_s": time.monotonic(),
        "busy_s": sum(getattr(cpu, f, 0.0) for f in _BUSY_FIELDS),
        "server_s": server,
        "own_s": _process_seconds(os.getpid(), reaped=False),
        "load_avg": list(os.getloadavg()),
        "cores": psutil.cpu_count() or 1,
    }


def foreign_cores(before: dict, after: dict) -> dict | None:
    """What other processes used between two readings, in cores (CPU seconds per second of wall time).

    The server's time is the sum over its processes after minus before: a child
    that ended inside the window was reaped by the router, whose children's
    counters then hold it. None where the readings cannot be compared (the
    server not found on this machine, no wall time, a damaged row).
    """
    try:
        wall = float(after["monotonic_s"]) - float(before["monotonic_s"])
        busy = float(after["busy_s"]) - float(before["busy_s"])
        own = float(after["own_s"]) - float(before["own_s"])
        server = sum(map(float, after["server_s"].values())) - sum(map(float, before["server_s"].values()))
        found = bool(after["server_s"]) and bool(before["server_s"])
        load = float(after["load_avg"][0])
        cores = int(after["cores"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None
    if wall <= 0 or not found:
        return None
    server, own = max(0.0, server), max(0.0, own)
    return {
        "foreign_cores": max(0.0, busy - server - own) / wall,
        "server_cores": server / wall,
        "own_cores": own / wall,
        "busy_cores": max(0.0, busy) / wall,
        "wall_s": wall,
        "load_avg": load,
        "cores": cores,
    }
