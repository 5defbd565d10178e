"""The server process's own memory, as the operating system counts it: on every machine.

The card's figure (NVML) exists only where an NVIDIA card does. On a CPU-only
host, on Apple Silicon and on unified-memory machines (an AMD APU, a GB10) the
model lives in the server process's own memory, so that process is read
through psutil on every host, card or not:

- RSS: the pages the process has resident. A memory-mapped model (llama.cpp's
  default ``--mmap``) counts here only as far as its pages were touched, and
  those pages are *file-backed*: the kernel can drop them and read them again
  from the file under pressure, unlike the *anonymous* pages (KV cache,
  compute buffers, weights copied out of the map), which must stay or swap.
  Linux gives the split (``RssAnon``, ``RssFile``, ``RssShmem`` in
  ``/proc/PID/status``) and the kernel's own high-water mark (``VmHWM``).
- USS (pages only this process holds) and PSS (shared pages divided among
  the processes sharing them), where the OS gives them (Linux: smaps_rollup;
  macOS and Windows give USS, no PSS).

Metal buffers on Apple Silicon are unified memory: they are in the process's
footprint, not on a card, and are never stated as one.

``HostMemorySampler`` reads the PIDs attached to each load (found as the card
sampler finds them: the router child by its port, the Ollama runner by its
model blob, else the load's PID) every ``interval_s`` into
``host_memory_samples``; ``cell_summary`` stores each cell's peak.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from dataclasses import dataclass

import psutil

from cardproof.marks import N_
from ..store import Store, StoreError, open_store, utcnow
from .readings import MIB

SOURCE = "psutil"

#: what a reading lacks, as fixed sentences (the report translates them; several are joined by "; ")
GIVEN_BY_NONE = {"uss": N_("USS is not given by this operating system"), "pss": N_("PSS is not given by this operating system"),
                 "split": N_("The split into anonymous and file-backed pages is not given by this operating system")}
DENIED = N_("USS and PSS need the right to read the process's page map")

_STATUS_FIELDS = {"RssAnon": "anon_mib", "RssFile": "file_mib", "RssShmem": "shmem_mib", "VmHWM": "hwm_mib"}


def _mib(value) -> float | None:
    return None if value is None else round(value / MIB, 3)


@dataclass
class ProcessMemory:
    """One look at one process's memory; ``None`` where the OS does not give a figure (``reason`` says which)."""

    pid: int
    rss_mib: float | None
    uss_mib: float | None = None
    pss_mib: float | None = None
    swap_mib: float | None = None
    anon_mib: float | None = None
    file_mib: float | None = None
    shmem_mib: float | None = None
    hwm_mib: float | None = None
    reason: str | None = None


def _proc_status(pid: int, proc: str = "/proc") -> dict[str, float]:
    """The resident split and high-water mark from ``/proc/PID/status`` (kB there), in MiB; {} off Linux."""
    out: dict[str, float] = {}
    try:
        with open(f"{proc}/{pid}/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in _STATUS_FIELDS:
                    out[_STATUS_FIELDS[key]] = round(int(rest.split()[0]) * 1024 / MIB, 3)
    except (OSError, ValueError, IndexError):
        return {}
    return out


def read_process(pid: int, *, proc: str = "/proc") -> ProcessMemory | None:
    """The process's memory now; None when it is gone.

    USS and PSS walk the process's page tables (smaps_rollup), which needs
    the right to read another user's process: without it RSS alone is kept
    and the reason says why the others are missing.
    """
    try:
        p = psutil.Process(pid)
        try:
            full = p.memory_full_info()
            denied = None
        except psutil.AccessDenied:
            full, denied = p.memory_info(), DENIED
    except psutil.NoSuchProcess:
        return None
    except psutil.Error as exc:
        return ProcessMemory(pid, None, reason=f"{type(exc).__name__}: {exc}")
    status = _proc_status(pid, proc) if sys.platform.startswith("linux") else {}
    reasons = [denied] if denied else [GIVEN_BY_NONE[attr] for attr in ("uss", "pss")
                                       if getattr(full, attr, None) is None]
    if not status:
        reasons.append(GIVEN_BY_NONE["split"])
    return ProcessMemory(
        pid=pid, rss_mib=_mib(full.rss), uss_mib=_mib(getattr(full, "uss", None)),
        pss_mib=_mib(getattr(full, "pss", None)), swap_mib=_mib(getattr(full, "swap", None)),
        anon_mib=status.get("anon_mib"), file_mib=status.get("file_mib"), shmem_mib=status.get("shmem_mib"),
        hwm_mib=status.get("hwm_mib"), reason="; ".join(reasons) or None,
    )


def host_available() -> dict:
    """The host's memory now: ``available_mib`` (Linux: MemAvailable, what can be had without swapping) and total."""
    vm = psutil.virtual_memory()
    return {"available_mib": _mib(vm.available), "total_mib": _mib(vm.total)}


_COLUMNS = ("run_id", "load_id", "pid", "ts", "rss_mib", "uss_mib", "pss_mib", "swap_mib", "anon_mib", "file_mib",
            "shmem_mib", "hwm_mib", "source", "note", "reason")
_INSERT = (f"insert into host_memory_samples ({', '.join(_COLUMNS)}) "
           f"values ({', '.join('?' * len(_COLUMNS))})")


def write_tick(store: Store, run_id: int | None, load_of_pid: dict[int, int], *, note: str | None = None,
               reader=read_process) -> int:
    """Read every attached process once and store one row each (a process gone is skipped); returns rows."""
    ts = utcnow()
    rows = []
    for pid, load_id in sorted(load_of_pid.items()):
        mem = reader(pid)
        if mem is None:
            continue
        row = {"run_id": run_id, "load_id": load_id, "ts": ts, "source": SOURCE, "note": note,
               **{k: getattr(mem, k) for k in ("pid", "rss_mib", "uss_mib", "pss_mib", "swap_mib", "anon_mib",
                                               "file_mib", "shmem_mib", "hwm_mib", "reason")}}
        rows.append(tuple(row.get(c) for c in _COLUMNS))
    if rows:
        with store.db.conn:
            store.db.conn.executemany(_INSERT, rows)
    return len(rows)


class HostMemorySampler:
    """Samples the processes of every attached load every ``interval_s`` into ``host_memory_samples``.

    Runs on every host: psutil needs no driver. The thread has its own
    connection to the store, as the card sampler's does.
    """

    def __init__(self, store: Store, *, run_id: int | None, interval_s: float = 1.0, reader=read_process):
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.store = store
        self.run_id = run_id
        self.interval_s = interval_s
        self.reader = reader
        self.errors: list[str] = []
        self._load_of_pid: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def attach(self, load_id: int, pids) -> None:
        """From now on, ``pids`` are read as ``load_id``'s (a load's earlier PIDs are dropped)."""
        self._load_of_pid = {**{p: lid for p, lid in self._load_of_pid.items() if lid != load_id},
                             **{int(p): load_id for p in pids}}

    def pids_of(self, load_id: int | None) -> list[int]:
        return sorted(p for p, lid in self._load_of_pid.items() if lid == load_id)

    def sample_once(self, note: str | None = None, load_id: int | None = None) -> int:
        """One tick now, in the caller's thread (``load_id``: that load's processes only)."""
        pids = {p: lid for p, lid in self._load_of_pid.items() if load_id is None or lid == load_id}
        return write_tick(self.store, self.run_id, pids, note=note, reader=self.reader)

    def start(self) -> "HostMemorySampler":
        self._thread = threading.Thread(target=self._loop, name="cardproof-host-memory", daemon=True)
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
                if self._load_of_pid:
                    try:
                        write_tick(store, self.run_id, dict(self._load_of_pid), reader=self.reader)
                    except Exception as exc:  # a failed tick is kept, the next one still runs
                        if len(self.errors) < 100:
                            self.errors.append(f"{type(exc).__name__}: {exc}")
                next_at += self.interval_s
                delay = next_at - time.monotonic()
                if delay < 0:
                    next_at, delay = time.monotonic(), 0
                self._stop.wait(delay)
        finally:
            store.close()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and wait for it; no row is written after this returns."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise RuntimeError(f"host memory sampler did not stop within {timeout_s} s")
            self._thread = None


# -- reading back -------------------------------------------------------------------------------------

def ticks(db, load_id: int, ts_from: str | None = None, ts_to: str | None = None) -> list[dict]:
    """Per tick of a load: its processes summed (RSS, USS, PSS, anonymous, file-backed, shared, swap, HWM)."""
    sql = ("select ts, sum(rss_mib), sum(uss_mib), sum(pss_mib), sum(anon_mib), sum(file_mib), sum(shmem_mib), "
           "sum(swap_mib), sum(hwm_mib), count(pss_mib), count(uss_mib), count(anon_mib), count(*), "
           "max(reason) from host_memory_samples where load_id = ? and rss_mib is not null")
    args: list = [load_id]
    if ts_from:
        sql, args = sql + " and ts >= ?", [*args, ts_from]
    if ts_to:
        sql, args = sql + " and ts <= ?", [*args, ts_to]
    out = []
    for (ts, rss, uss, pss, anon, file_, shmem, swap, hwm, n_pss, n_uss, n_anon, n, reason) in db.execute(
            sql + " group by ts order by ts", args):
        # a sum over processes of which one lacks a figure is no figure
        out.append({"ts": ts, "rss_mib": rss, "uss_mib": uss if n_uss == n else None,
                    "pss_mib": pss if n_pss == n else None, "anon_mib": anon if n_anon == n else None,
                    "file_mib": file_ if n_anon == n else None, "shmem_mib": shmem if n_anon == n else None,
                    "swap_mib": swap, "hwm_mib": hwm, "reason": reason})
    return out


def summarise(series: list[dict]) -> dict | None:
    """Peak and median of a tick series; the split at the RSS peak; None without a tick."""
    if not series:
        return None
    top = max(series, key=lambda t: t["rss_mib"])

    def peak(key):
        vals = [t[key] for t in series if t[key] is not None]
        return max(vals) if vals else None

    return {
        "n": len(series), "peak_rss_mib": top["rss_mib"], "median_rss_mib": statistics.median(
            t["rss_mib"] for t in series),
        "peak_pss_mib": peak("pss_mib"), "peak_uss_mib": peak("uss_mib"), "hwm_mib": peak("hwm_mib"),
        "anon_mib": top["anon_mib"], "file_mib": top["file_mib"], "shmem_mib": top["shmem_mib"],
        "swap_mib": peak("swap_mib"), "reason": top["reason"],
    }


def cell_summary(store: Store, run_id: int, cell_id: int, load_id: int | None, ts_from: str | None) -> dict:
    """The load's process memory over the cell just finished (peak, median, split at the peak); stored."""
    ts_to = utcnow()
    stats = summarise(ticks(store.db, load_id, ts_from, ts_to)) if load_id is not None else None
    row = {"run_id": run_id, "load_id": load_id, "cell_id": cell_id, "ts_from": ts_from, "ts_to": ts_to,
           "status": "ok" if stats else ("no_load" if load_id is None else "no_process"),
           "n_samples": stats["n"] if stats else 0,
           **{k: (stats or {}).get(k) for k in ("peak_rss_mib", "median_rss_mib", "peak_pss_mib", "peak_uss_mib",
                                                "anon_mib", "file_mib", "hwm_mib")}}
    row["id"] = store.insert("host_memory_cells", row)
    return row


def load_summary(db, load_id: int) -> dict | None:
    """The load's process memory over its whole life (every tick attributed to it)."""
    try:
        return summarise(ticks(db, load_id))
    except Exception as exc:  # noqa: BLE001 -- a store from before the table: no host figure
        if "no such table" in str(exc):
            return None
        raise
