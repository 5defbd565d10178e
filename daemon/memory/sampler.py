"""The NVML sampler: a background thread that writes what the card shows.

One tick = one Reading = one row per device and one per process, all with
the same timestamp, written in one transaction. Without a driver the sampler
writes a single row that says so and stops there: it never substitutes a
runtime's self-report for the card.
"""

from __future__ import annotations

import threading
import time

from ..store import Store, StoreError, open_store, utcnow
from .readings import NOT_MEASURED, Reading, SourceUnavailable


def reading_rows(reading: Reading, run_id: int | None, load_of_pid: dict[int, int] | None = None,
                 note: str | None = None) -> list[dict]:
    """Store rows for one reading; PIDs of a known load carry its load_id."""
    load_of_pid = load_of_pid or {}
    rows = []
    for d in reading.devices:
        rows.append(
            {
                "run_id": run_id, "ts": reading.ts, "scope": "device", "device_index": d.index,
                "device_name": d.name, "uuid": d.uuid, "used_mib": d.used_mib, "total_mib": d.total_mib,
                "free_mib": d.free_mib, "util_pct": d.util_gpu_pct, "util_mem_pct": d.util_mem_pct,
                "pcie_gen_current": d.pcie_gen_current, "pcie_gen_max": d.pcie_gen_max,
                "pcie_width_current": d.pcie_width_current, "pcie_width_max": d.pcie_width_max,
                "source": reading.source, "note": note, "reason": d.reason,
            }
        )
    for p in reading.processes:
        rows.append(
            {
                "run_id": run_id, "ts": reading.ts, "scope": "process", "device_index": p.device_index,
                "pid": p.pid, "process_name": p.name, "used_mib": p.used_mib, "process_kind": p.kind,
                "pid_status": p.pid_status, "reason": p.reason, "source": reading.source, "note": note,
                # a foreign PID never gets a load's id, even if its number matches
                "load_id": load_of_pid.get(p.pid) if p.attributable else None,
            }
        )
    return rows


_COLUMNS = (
    "run_id", "load_id", "ts", "scope", "device_index", "pid", "process_name", "used_mib", "total_mib", "free_mib",
    "util_pct", "source", "note", "device_name", "uuid", "util_mem_pct", "pcie_gen_current", "pcie_gen_max",
    "pcie_width_current", "pcie_width_max", "process_kind", "pid_status", "reason",
)
_INSERT = f"insert into memory_samples ({', '.join(_COLUMNS)}) values ({', '.join('?' * len(_COLUMNS))})"


def write_reading(store: Store, reading: Reading, run_id: int | None, load_of_pid=None, note=None) -> int:
    """Write one reading in one transaction; returns the number of rows.

    A plain executemany: sqlite-utils' insert_all inspects the table on every
    call, which at 10 Hz cost more than the reading itself.
    """
    rows = reading_rows(reading, run_id, load_of_pid, note)
    with store.db.conn:
        store.db.conn.executemany(_INSERT, [tuple(r.get(c) for c in _COLUMNS) for r in rows])
    return len(rows)


def write_not_measured(store: Store, run_id: int | None, source_kind: str, reason: str) -> int:
    """The one row that says the card was not read, and why."""
    return store.insert(
        "memory_samples",
        {"run_id": run_id, "ts": utcnow(), "scope": "device", "source": source_kind,
         "note": NOT_MEASURED, "reason": reason},
    )


class MemorySampler:
    """Samples ``source`` every ``interval_s`` seconds into ``memory_samples``.

    The thread opens its own connection to the store's file (SQLite
    connections stay in their thread); WAL lets the runner write beside it.
    ``attach(load_id, pids)`` marks the rows of a load's processes.
    """

    def __init__(self, store: Store, source, *, run_id: int | None, interval_s: float = 1.0):
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.store = store
        self.source = source
        self.run_id = run_id
        self.interval_s = interval_s
        self.available: bool | None = None
        self.reason: str | None = None
        self.ticks = 0
        self.rows = 0
        self.errors: list[str] = []
        self.last: Reading | None = None
        self._load_of_pid: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def attach(self, load_id: int, pids) -> None:
        """From now on, rows of ``pids`` carry ``load_id``."""
        self._load_of_pid = {**{p: l for p, l in self._load_of_pid.items() if l != load_id},
                             **{int(p): load_id for p in pids}}

    def detach(self, load_id: int) -> None:
        self._load_of_pid = {p: l for p, l in self._load_of_pid.items() if l != load_id}

    def sample_once(self, note: str | None = None) -> Reading:
        """One reading now, in the caller's thread and through the caller's store."""
        reading = self.source.read()
        self.rows += write_reading(self.store, reading, self.run_id, self._load_of_pid, note=note)
        self.last = reading
        self.ticks += 1
        return reading

    def start(self) -> "MemorySampler":
        """Open the source and start the thread; without a driver write one row and return."""
        try:
            self.source.open()
        except SourceUnavailable as exc:
            self.available, self.reason = False, str(exc)
            write_not_measured(self.store, self.run_id, self.source.kind, self.reason)
            return self
        self.available = True
        self._thread = threading.Thread(target=self._loop, name="cardproof-nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            store = open_store(self.store.path)
        except StoreError as exc:
            self.errors.append(str(exc))
            return
        try:
            next_at = time.monotonic()
            while not self._stop.is_set():
                try:
                    reading = self.source.read()
                    self.rows += write_reading(store, reading, self.run_id, self._load_of_pid)
                    self.last = reading
                    self.ticks += 1
                except Exception as exc:  # a failed tick is recorded, the next one still runs
                    if len(self.errors) < 100:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
                # a fixed schedule, not sleep(interval): the rate stays true under load
                next_at += self.interval_s
                delay = next_at - time.monotonic()
                if delay < 0:
                    next_at = time.monotonic()
                    delay = 0
                self._stop.wait(delay)
        finally:
            store.close()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and wait for it; no row is written after this returns."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise RuntimeError(f"NVML sampler did not stop within {timeout_s} s")
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
