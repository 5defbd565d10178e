"""The runner's handle on energy: the counters opened once, read around an idle wait and every cell.

    cap = EnergyCapture(store, run_id).start()   # run start: each source opened, or why not stored;
                                                 # where one opened, the idle draw is measured first
    cap.cell_start(cell_id) / cap.cell_end(cell_id)
    cap.stop()

Rows go to ``energy_readings``: one per domain and reading (``phase`` idle_start, idle_end,
cell_start, cell_end) with the counter in joules and a monotonic clock, and one ``unavailable`` row per
source that could not be read, with the reason. Nothing is estimated where no counter exists.
"""

from __future__ import annotations

import time

from ..store import Store, utcnow
from .counters import EnergyUnavailable, default_sources

IDLE_S = 2.0  # long enough for RAPL's 1 ms and NVML's ~100 ms updates to average out, short beside a run


class EnergyCapture:
    """Every energy counter this machine has, read at the run's idle wait and each cell's edges."""

    def __init__(self, store: Store, run_id: int, *, sources=None, idle_s: float = IDLE_S,
                 clock=time.monotonic, sleep=time.sleep):
        self.store = store
        self.run_id = run_id
        self.sources = list(sources) if sources is not None else default_sources()
        self.idle_s = idle_s
        self.clock = clock
        self.sleep = sleep
        self.readable: list = []
        self.reasons: dict[str, str] = {}

    def start(self) -> "EnergyCapture":
        """Open each source (a refusal is stored with its reason); measure the idle draw where one opened."""
        for source in self.sources:
            try:
                source.open()
            except EnergyUnavailable as exc:
                self.reasons[source.kind] = str(exc)
                self.store.insert("energy_readings", {"run_id": self.run_id, "phase": "unavailable", "ts": utcnow(),
                                                      "source": source.kind, "reason": str(exc)})
                continue
            self.readable.append(source)
        if self.readable and self.idle_s > 0:
            self.read("idle_start")
            self.sleep(self.idle_s)
            self.read("idle_end")
        return self

    def status_line(self) -> str:
        """One line for the run's progress output."""
        if self.readable:
            return "energy: reading " + ", ".join(s.kind for s in self.readable) + " at each cell's start and end"
        return "energy: not measured — " + "; ".join(f"{k}: {v}" for k, v in self.reasons.items())

    def read(self, phase: str, cell_id: int | None = None) -> int:
        """Every readable counter now, stored as one row per domain; a failed read is stored with its reason."""
        rows = []
        for source in self.readable:
            ts, mono = utcnow(), self.clock()
            base = {"run_id": self.run_id, "cell_id": cell_id, "phase": phase, "ts": ts, "mono_s": mono,
                    "source": source.kind}
            try:
                counters = source.read()
            except Exception as exc:  # a counter that stops answering mid-run: that reading says so
                rows.append({**base, "reason": f"{type(exc).__name__}: {exc}"})
                continue
            rows.extend({**base, "domain": c.domain, "joules": c.joules, "wrap_joules": c.wrap_joules}
                        for c in counters)
        if rows:
            with self.store.db.conn:
                self.store.db["energy_readings"].insert_all(rows)
        return len(rows)

    def cell_start(self, cell_id: int) -> None:
        if self.readable:
            self.read("cell_start", cell_id)

    def cell_end(self, cell_id: int) -> None:
        if self.readable:
            self.read("cell_end", cell_id)

    def stop(self) -> None:
        """Release every source; safe to call twice."""
        for source in self.readable:
            source.close()
        self.readable = []
