"""Give the server under test CPUs of its own, and the clients the rest.

A load generator and the server it measures should not share cores: every
moment the client spends parsing a chunk on a server's core stalls one of
llama.cpp's compute threads, and its threads wait for each other at every
step of the graph, so one stalled thread stalls them all. On a machine with
many cores that never shows; on a small one it turns a client's extra CPU
into extra request time, and a heavier client (GuideLLM's worker processes)
into a slower server. Datacenter load tools are run the same way: the
client on other cores or another host.

``split()`` takes the CPUs this process may run on and keeps the first one
(``clients`` CPUs, default 1) for the clients, the rest for the server.
``server_start()`` starts a server on its CPUs (a child inherits the
affinity of the process that starts it) and moves this process -- and every
client process it starts afterwards -- onto the clients' CPUs. With one CPU,
or ``--shared-cores``, nothing is pinned and everyone shares, as before.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class CoreSplit:
    server: frozenset[int]
    clients: frozenset[int]

    @property
    def threads(self) -> int:
        """The server's ``--threads``: one per CPU it has."""
        return len(self.server)

    def describe(self) -> str:
        if self.server == self.clients:
            return f"server and clients share CPUs {_cpus(self.server)} (not pinned)"
        return (f"server pinned to CPUs {_cpus(self.server)} (--threads {self.threads}), "
                f"clients to CPUs {_cpus(self.clients)}")


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def split(shared: bool = False, clients: int = 1) -> CoreSplit:
    """Client CPUs first, server CPUs the rest; everyone shares where that would leave either side none."""
    allowed = sorted(os.sched_getaffinity(0))
    if shared or len(allowed) <= clients:
        everyone = frozenset(allowed)
        return CoreSplit(everyone, everyone)
    return CoreSplit(frozenset(allowed[clients:]), frozenset(allowed[:clients]))


@contextmanager
def server_start(cores: CoreSplit):
    """Inside: this process runs on the server's CPUs, so the server started here inherits them; after: the clients'."""
    os.sched_setaffinity(0, cores.server)
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores.clients)


def add_argument(ap) -> None:
    ap.add_argument("--shared-cores", action="store_true",
                    help="let server and clients share every CPU (default: the server gets all CPUs but one, "
                         "the clients that one)")
