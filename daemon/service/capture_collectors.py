"""The daemon's capture collectors: server logs and memory from the card.

They record whether or not a campaign runs, so the lines and readings of
foreign traffic between campaigns are evidence too.
"""

from __future__ import annotations

import time

from ..logs import LogSourceError, capture_file, capture_journal
from ..memory.nvml import NvmlSource
from ..memory.sampler import MemorySampler
from ..store import StoreError


class LogTailCollector:
    """Imports new lines of each configured log file and journal unit every few seconds."""

    name = "logs"

    def __init__(self, log_files, journal_units, *, every_s: float = 2.0):
        self.log_files, self.journal_units, self.every_s = tuple(log_files), tuple(journal_units), every_s
        self.ctx = None
        self._next = 0.0
        self.lines = 0
        self.errors: dict[str, str] = {}

    def start(self, ctx) -> None:
        self.ctx = ctx
        self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        if now < self._next or self.ctx is None:
            return
        self._next = now + self.every_s
        run_id = self.ctx.current_run_id()
        for path in self.log_files:
            self._one(path, lambda p=path: capture_file(self.ctx.store, p, run_id=run_id))
        for unit in self.journal_units:
            self._one(unit, lambda u=unit: capture_journal(self.ctx.store, u, run_id=run_id))

    def _one(self, name: str, call) -> None:
        try:
            stats = call()
        except (LogSourceError, StoreError, OSError) as exc:
            # a missing or rotated log is reported, never fatal to the daemon
            self.errors[name] = str(exc)
            return
        self.errors.pop(name, None)
        if isinstance(stats, dict):
            self.lines += int(stats.get("lines") or stats.get("stored") or 0)

    def stop(self) -> None:
        pass

    def status(self) -> dict:
        out = {"state": "failing" if self.errors else "running", "lines": self.lines,
               "sources": len(self.log_files) + len(self.journal_units)}
        if self.errors:
            out["errors"] = self.errors
        return out


class NvmlCollector:
    """The 1 Hz (configurable) NVML sampler; says plainly when there is no driver."""

    name = "nvml"

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self.sampler: MemorySampler | None = None

    def start(self, ctx) -> None:
        self.sampler = MemorySampler(ctx.store, NvmlSource(), run_id=None, interval_s=self.interval_s).start()

    def tick(self, now: float) -> None:
        pass

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def status(self) -> dict:
        if self.sampler is None:
            return {"state": "stopped"}
        if not self.sampler.available:
            return {"state": "unavailable", "reason": str(self.sampler.reason)}
        return {"state": "running", "interval_s": self.interval_s}
