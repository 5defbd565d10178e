"""Collectors: what the daemon records whether or not a campaign runs.

A collector has ``start(ctx)``, ``tick(now)`` and ``stop()`` and reports its
state through ``status()``. ``tick`` is called from the daemon's main loop
every ``tick_s`` and must return quickly; a collector with its own rhythm
(the NVML sampler) starts a thread in ``start`` and does nothing in ``tick``.
Threads open their own store connection (``ctx.db_path``): SQLite
connections stay in the thread that made them.

Adding a collector is one entry in ``FACTORIES``: a function from the
daemon config to a collector, or None when the config does not ask for it.
The heartbeat is always first: it writes the daemon's state row.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from ..store import Store, StoreError, dumps, utcnow
from .config import DaemonConfig
from .progress import Progress


@dataclass
class CollectorContext:
    """What a collector may use: the store, the config, the current run."""

    store: Store  # the main thread's connection: use it only from tick()
    db_path: Path
    config: DaemonConfig
    daemon_id: int
    progress: Progress
    statuses: Callable[[], dict]  # every collector's status(), for the heartbeat row

    def current_run_id(self) -> int | None:
        """The run the worker is measuring now, so rows can carry its id."""
        return self.progress.snapshot().run_id


class Collector(Protocol):
    name: str

    def start(self, ctx: CollectorContext) -> None: ...

    def tick(self, now: float) -> None: ...

    def stop(self) -> None: ...

    def status(self) -> dict: ...


class Unavailable:
    """A collector the config asks for that cannot run here; says why, does nothing."""

    def __init__(self, name: str, reason: str):
        self.name, self.reason = name, reason

    def start(self, ctx) -> None:
        pass

    def tick(self, now: float) -> None:
        pass

    def stop(self) -> None:
        pass

    def status(self) -> dict:
        return {"state": "unavailable", "reason": self.reason}


class HeartbeatCollector:
    """Writes the daemon's state row: heartbeat time, phase, progress, collectors.

    Written when the progress changed (a new sample, a new phase) and at least
    every ``heartbeat_s``; ``cardproof status`` reads it from another process
    and calls the daemon dead when the heartbeat is older than three periods.
    """

    name = "heartbeat"

    def __init__(self, heartbeat_s: float):
        self.heartbeat_s = heartbeat_s
        self.ctx: CollectorContext | None = None
        self.last_ok: float | None = None  # monotonic time of the last successful write
        self.writes = 0
        self.error: str | None = None
        self._written_for: float | None = None

    def start(self, ctx: CollectorContext) -> None:
        self.ctx = ctx
        self.write(force=True)

    def tick(self, now: float) -> None:
        self.write(now=now)

    def write(self, *, now: float | None = None, force: bool = False, state: str | None = None,
              extra: dict | None = None) -> bool:
        """Write the state row if due (or ``force``); True when a write succeeded."""
        now = time.monotonic() if now is None else now
        snap = self.ctx.progress.snapshot()
        due = self.last_ok is None or now - self.last_ok >= self.heartbeat_s
        changed = snap.updated != self._written_for
        if not (force or due or changed):
            return False
        values = {
            "heartbeat_at": utcnow(),
            "heartbeat_s": self.heartbeat_s,
            "state": state or snap.phase,
            "queue_id": snap.queue_id,
            "run_id": snap.run_id,
            "progress_json": dumps(snap.as_dict()),
            "status_text": snap.status_line(),
            "collectors_json": dumps(self.ctx.statuses()),
            **(extra or {}),
        }
        try:
            self.ctx.store.update("daemon_state", self.ctx.daemon_id, values)
        except StoreError as exc:
            # no watchdog ping follows a failed heartbeat: systemd restarts a daemon that cannot write
            self.error = str(exc)
            return False
        self.last_ok, self._written_for, self.error = now, snap.updated, None
        self.writes += 1
        return True

    def healthy(self, now: float) -> bool:
        """True while the last successful write is recent enough to vouch for the daemon."""
        return self.last_ok is not None and now - self.last_ok <= 2 * self.heartbeat_s

    def stop(self) -> None:
        pass

    def status(self) -> dict:
        return {"state": "failing" if self.error else "running", "writes": self.writes,
                **({"error": self.error} if self.error else {})}


def _want_logs(config: DaemonConfig):
    if config.collectors.log_files or config.collectors.journal_units:
        from .capture_collectors import LogTailCollector

        return LogTailCollector(config.collectors.log_files, config.collectors.journal_units)
    return None


def _want_nvml(config: DaemonConfig):
    if config.collectors.nvml:
        from .capture_collectors import NvmlCollector

        return NvmlCollector(config.collectors.sampler_interval_s)
    return None


def _want_metrics(config: DaemonConfig):
    from .metrics import MetricsEndpoint

    return MetricsEndpoint(config.metrics) if config.metrics.enabled else None


def _retention(config: DaemonConfig):
    from .retention import RetentionCollector

    return RetentionCollector(config.retention)


#: name -> factory(config) -> collector or None.
FACTORIES: dict[str, Callable[[DaemonConfig], object | None]] = {
    "logs": _want_logs,
    "nvml": _want_nvml,
    "metrics": _want_metrics,
    "retention": _retention,
}


def build_collectors(config: DaemonConfig) -> list:
    """The heartbeat, then every registered collector the config asks for."""
    out: list = [HeartbeatCollector(config.heartbeat_s)]
    for name, factory in FACTORIES.items():
        c = factory(config)
        if c is not None:
            out.append(c)
    return out


class CollectorSet:
    """Starts, ticks and stops collectors; one failing collector never stops the others."""

    def __init__(self, collectors: list):
        self.collectors = collectors
        self.failures: dict[str, str] = {}

    @property
    def heartbeat(self) -> HeartbeatCollector:
        return self.collectors[0]

    def start(self, ctx: CollectorContext) -> None:
        for c in self.collectors:
            self._guard(c, "start", lambda c=c: c.start(ctx))

    def tick(self, now: float) -> None:
        for c in self.collectors:
            if c.name not in self.failures:
                self._guard(c, "tick", lambda c=c: c.tick(now))

    def stop(self) -> None:
        # reverse order: the heartbeat writes last
        for c in reversed(self.collectors):
            self._guard(c, "stop", c.stop)

    def statuses(self) -> dict:
        out = {}
        for c in self.collectors:
            try:
                out[c.name] = c.status()
            except Exception as exc:  # a status() bug must not break the heartbeat
                out[c.name] = {"state": "failing", "error": f"status(): {type(exc).__name__}: {exc}"}
            if c.name in self.failures:
                out[c.name] = {"state": "failed", "error": self.failures[c.name]}
        return out

    def _guard(self, c, what: str, fn) -> None:
        try:
            fn()
        except Exception as exc:  # recorded in the state row; the daemon keeps capturing the rest
            self.failures[c.name] = f"{what}(): {type(exc).__name__}: {exc}"


def host_and_pid() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}
