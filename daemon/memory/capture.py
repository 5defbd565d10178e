"""The runner's handle on memory: one object, five calls.

    cap = MemoryCapture(store, run_id).start()          # run start
    check = cap.before_load(model_id, required_mib=None) # right before each load
    cap.after_load(load_id, pid=..., port=...)           # once the load is ready
    cap.start_cell(cell_id, load_id)                     # before each cell's first sample
    cap.end_cell(cell_id, load_id)                       # after each cell's last sample
    cap.stop()                                           # run end (also on interrupt)

Without a driver every call still returns, and what it stores says
"card memory: not measured (no NVIDIA driver)". The server process's own
memory on the host (``host.py``) is sampled on every machine, driver or not.
"""

from __future__ import annotations

from ..store import Store, utcnow
from .attribution import cell_stats, resolve_load_pids, settle_after_load
from .budget import free_before_load
from .host import HostMemorySampler, cell_summary
from .amdsmi import AmdSmiSource
from .nvml import NvmlSource
from .readings import NOT_MEASURED, SourceUnavailable
from .sampler import MemorySampler
from .selfreport import record_llama_selfreport, record_ollama_selfreport


class _NoCard:
    """No card library answered: every read says why (NVML's reason first, AMD's beside it)."""

    kind = "nvml"

    def __init__(self, reason: str):
        self.reason = reason

    def open(self):
        raise SourceUnavailable(self.reason)

    read = open

    def close(self) -> None:
        pass


def default_source():
    """NVML where an NVIDIA driver answers, else AMD SMI where it finds an AMD GPU, else the reasons of both."""
    nvml = NvmlSource()
    try:
        return nvml.open()
    except SourceUnavailable as nv_exc:
        amd = AmdSmiSource()
        try:
            return amd.open()
        except SourceUnavailable as amd_exc:
            return _NoCard(f"{nv_exc}; AMD: {amd_exc}")


class MemoryCapture:
    """Sampler, free-memory checks, steady state and per-cell stats for one run."""

    def __init__(self, store: Store, run_id: int, *, source=None, interval_s: float = 1.0,
                 settle_timeout_s: float = 15.0, settle_poll_s: float = 0.5):
        self.store = store
        self.run_id = run_id
        self.source = source if source is not None else default_source()
        self.sampler = MemorySampler(store, self.source, run_id=run_id, interval_s=interval_s)
        self.settle_timeout_s = settle_timeout_s
        self.settle_poll_s = settle_poll_s
        self.host = HostMemorySampler(store, run_id=run_id, interval_s=interval_s)
        self._cell_from: dict[int, str] = {}

    @property
    def available(self) -> bool:
        return bool(self.sampler.available)

    def start(self) -> "MemoryCapture":
        """Open the card and start sampling; without a driver, record that once. The host is sampled always."""
        self.sampler.start()
        self.host.start()
        return self

    def status_line(self) -> str:
        """One line for the run's progress output."""
        host = f"server process memory: psutil every {self.host.interval_s:g} s"
        if self.sampler.available:
            return f"card memory: sampling {self.source.kind} every {self.sampler.interval_s:g} s; {host}"
        return f"{NOT_MEASURED} — {self.sampler.reason}; {host}"

    def before_load(self, model_id: int | None, *, required_mib: float | None = None) -> dict:
        """Free memory from the card right before a load (the pinned-model rule reads it)."""
        return free_before_load(self.store, self.source, run_id=self.run_id, model_id=model_id,
                                required_mib=required_mib)

    def after_load(self, load_id: int | None, *, pid: int | None = None, port: int | None = None,
                   arg: str | None = None, include_children: bool = False) -> dict | None:
        """Identify the load's processes and store its steady state.

        Port first (router child), then ``arg`` (an Ollama runner's model blob
        on its command line), then ``pid``. Returns the stored stats row.
        """
        if load_id is None:
            return None
        pids = resolve_load_pids(self.store, load_id, pid=pid, port=port, arg=arg,
                                 include_children=include_children)
        self.host.attach(load_id, pids)
        self.host.sample_once("after_load", load_id)
        if not self.available:
            return settle_after_load(self.store, self.source, self.run_id, load_id, pids, timeout_s=0)
        self.sampler.attach(load_id, pids)
        return settle_after_load(self.store, self.source, self.run_id, load_id, pids,
                                 poll_s=self.settle_poll_s, timeout_s=self.settle_timeout_s)

    def start_cell(self, cell_id: int, load_id: int | None) -> None:
        """The cell's window opens: one host reading now, so a cell shorter than a tick still has one."""
        self._cell_from[cell_id] = utcnow()
        if load_id is not None:
            self.host.sample_once("cell_start", load_id)

    def end_cell(self, cell_id: int, load_id: int | None) -> dict:
        """Peak and median of the load's memory over the cell just finished (card, then host process)."""
        if load_id is not None:
            self.host.sample_once("cell_end", load_id)
        began = self._cell_from.pop(cell_id, None) or self.store.db.execute(
            "select min(started_at) from samples where cell_id = ?", [cell_id]).fetchone()[0]
        cell_summary(self.store, self.run_id, cell_id, load_id, began)
        return cell_stats(self.store, self.run_id, cell_id, load_id)

    def selfreport_llama(self, load_id: int) -> int | None:
        """llama-server's own figure from the load's log lines (call once its lines are stored)."""
        return record_llama_selfreport(self.store, self.run_id, load_id)

    def selfreports_llama_run(self) -> int:
        """Self-reports for every load of the run that has log lines; returns how many were stored.

        llama-server prints its exit table when the instance stops, so call
        this at run end, after the log lines are captured and attributed.
        """
        done = 0
        for (load_id,) in self.store.db.execute(
            """select id from loads where run_id = ? and id not in
               (select load_id from memory_selfreports where load_id is not null) order by id""",
            [self.run_id],
        ).fetchall():
            done += record_llama_selfreport(self.store, self.run_id, load_id) is not None
        return done

    def selfreport_ollama(self, load_id: int, ps: dict, model: str) -> int | None:
        """Ollama's /api/ps figure for ``model`` (pass the parsed JSON response)."""
        return record_ollama_selfreport(self.store, self.run_id, load_id, ps, model)

    def stop(self) -> None:
        """Stop the samplers and release the driver; safe to call twice."""
        self.host.stop()
        self.sampler.stop()
        self.source.close()
