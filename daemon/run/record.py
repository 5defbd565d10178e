"""A run's own record: the frozen campaign, the ``runs`` row when it starts, its status when it ends.

Status, exit code and coverage are written by the runner itself (principle
10): nothing later reconstructs them. The log capture happens exactly once,
before judging or, on an early end, before the status is written.

In short, ``run_record.py``, ``run_loads.py``: a run's row, status, exit code, coverage
and final log capture; the row keeps the cardproof that measured and the machine
(``hostinfo.run_host``: CPU model, logical CPUs, the 1-minute load average at the start and, written
at the end, at the end; m028), which a comparison of two runs names where they differ; model loads
and the pin guard; ``free_router`` (the run's models unloaded from a router before the variants, the
fit test or the quality step load their own); ``note_crash`` (after a failed request, whether a
router's child died) asks whether the server is a router inside ``BackendError``: a variant's fresh
backend whose server refuses its listing (401) or died under the first request gives failed samples,
not a traceback that leaves the run ``running``
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Callable

from cardproof import __version__
from cardproof.daemon.host import info as hostinfo, setup as runsetup
from cardproof.daemon.store import liveness
from cardproof.daemon.campaign.frozen import normalised
from cardproof.daemon.campaign.model import Campaign
from cardproof.daemon.store.crashes import describe_end
from cardproof.daemon.logs import LogSourceError, attribute_run, capture_file, capture_journal
from cardproof.daemon.logs.summary import crashed_loads
from cardproof.daemon.store.redact import public_url
from cardproof.daemon.store import Store, StoreError, dumps, json_value, utcnow

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 130


@dataclass
class RunOutcome:
    run_id: int
    status: str
    exit_code: int
    planned: int
    measured: int
    failed: int

    @property
    def coverage(self) -> float:
        return self.measured / self.planned if self.planned else 0.0


@dataclass
class RunState:
    """What a run has counted so far, and what went wrong after its measurements."""

    planned: int
    measured: int = 0
    failed: int = 0
    logs_captured: bool = False
    notes: list[str] = field(default_factory=list)  # kept on the run beside its real status


def register_campaign(store: Store, campaign: Campaign) -> int:
    """Freeze the campaign text, its SHA-256, the time and the campaign parsed from it (principle 7).

    Readers take the parsed form (``campaign/frozen.py``), so a later parser never rereads the text.
    """
    return store.insert(
        "campaigns",
        {
            "name": campaign.name,
            "path": campaign.path,
            "sha256": campaign.sha256,
            "toml_text": campaign.text,
            "campaign_json": json.dumps(normalised(campaign)),
            "registered_at": utcnow(),
        },
    )


def start_run(store: Store, campaign: Campaign, planned: int, echo: Callable[[str], None],
              lock: liveness.RunLock | None = None) -> int:
    """Mark runs whose process is gone, freeze the campaign and insert this run's row (status ``running``)."""
    try:
        gone = liveness.reconcile_runs(store, by=f"cardproof run (pid {os.getpid()})")
    except Exception as exc:  # noqa: BLE001 -- another run's death must never stop this one
        gone = []
        echo(f"warning: runs whose process is gone not marked interrupted: {type(exc).__name__}: {exc}")
    for g in gone:
        echo(f"run {g['run_id']} marked interrupted: {g['why']} ({g['measured']}/{g['planned']} samples)")
    campaign_id = register_campaign(store, campaign)
    identity = liveness.this_process()
    run_id = store.insert(
        "runs",
        {
            "campaign_id": campaign_id,
            **identity,
            "host": hostinfo.host_name(),
            "host_json": dumps(hostinfo.run_host()),
            "cardproof_version": __version__,
            "gpus_json": dumps(hostinfo.gpu_inventory()),
            "backend": campaign.backend,
            "server_url": public_url(campaign.url),  # shown in the article: no login
            "started_at": utcnow(),
            "status": "running",
            "samples_planned": planned,
            "samples_measured": 0,
            "samples_failed": 0,
        },
    )
    _setup(echo, runsetup.record_start, store, run_id, campaign.url)
    if lock is not None:
        lock.bind(run_id, identity)
        if lock.warning:
            echo(f"warning: {lock.warning}")
    return run_id


def _setup(echo: Callable[[str], None], record, *args) -> None:
    """One step of recording the run's setup (daemon/host/setup.py); a failure is a warning, never the run's end."""
    try:
        record(*args)
    except Exception as exc:  # noqa: BLE001 -- a machine fact that cannot be read must not stop a measurement
        echo(f"warning: run setup not fully recorded: {type(exc).__name__}: {exc}")


def record_models(store: Store, run_id: int, model_ids: dict[str, int], echo: Callable[[str], None]) -> None:
    """The registered models' files and origins in the run's setup row."""
    _setup(echo, runsetup.record_models, store, run_id, model_ids)


def capture_logs_once(store: Store, campaign: Campaign, run_id: int, state: RunState,
                      echo: Callable[[str], None]) -> None:
    """The server's log lines of this run, captured the first time only; a failure becomes a note."""
    if state.logs_captured:
        return
    state.logs_captured = True
    problem = _capture_logs(store, campaign, run_id, echo)
    if problem:
        state.notes.append(problem)


def finish_run(store: Store, campaign: Campaign, run_id: int, state: RunState, echo: Callable[[str], None],
               status: str, code: int, error: str | None = None,
               lock: liveness.RunLock | None = None) -> RunOutcome:
    """Write the run's status, exit code and coverage (after its logs), and let go of its lock."""
    capture_logs_once(store, campaign, run_id, state, echo)
    _setup(echo, runsetup.record_end, store, run_id)
    store.update(
        "runs",
        run_id,
        {
            "host_json": _with_end_load(store, run_id),
            "ended_at": utcnow(),
            "status": status,
            "exit_code": code,
            "samples_measured": state.measured,
            "samples_failed": state.failed,
            "coverage": state.measured / state.planned if state.planned else 0.0,
            "error_text": "; ".join(filter(None, [error, *state.notes])) or None,
        },
    )
    if lock is not None:
        lock.release(finished=True)
    return RunOutcome(run_id, status, code, state.planned, state.measured, state.failed)


def _with_end_load(store: Store, run_id: int) -> str | None:
    """The run's ``host_json`` with the machine's load at its end beside the load at its start."""
    row = store.db.execute("select host_json from runs where id = ?", [run_id]).fetchone()
    host = json_value(row[0], dict, {}) if row else {}
    if not isinstance(host, dict):
        host = {}
    load = host.get("load_1m") if isinstance(host.get("load_1m"), dict) else {}
    host["load_1m"] = load | {"end": hostinfo.load_average()}
    return dumps(host)


def _capture_logs(store: Store, campaign: Campaign, run_id: int, echo) -> str | None:
    """Bring the server's log lines of this run into the store and link them to its loads.

    A failing capture, whatever the cause (a locked or full database, an
    unreadable log, a bug), is a note on the run -- returned, for the run's
    error_text -- never a lost run: its status, gates and rules come after.
    """
    if not (campaign.log_file or campaign.journal_unit):
        return None
    try:
        run = store.db["runs"].get(run_id)
        if campaign.log_file:
            stats = capture_file(store, campaign.log_file, run_id=run_id)
            echo(f"log {campaign.log_file}: {stats.get('lines', stats)} lines captured")
        if campaign.journal_unit:
            capture_journal(store, campaign.journal_unit, run_id=run_id, since=run["started_at"])
        linked = attribute_run(store, run_id)
        echo(f"log lines linked to {len(linked.get('matched', []))} loads")
        for crash in crashed_loads(store.db, run_id):
            echo(f"load {crash['id']} ({crash['model']}): the server process died: {describe_end(crash['end_reason'])}"
                 + (f"; the log says: {crash['line']}" if crash["line"] else ""))
    except Exception as exc:  # noqa: BLE001 -- see the docstring
        if store.db.conn.in_transaction:  # half a capture is no capture: the run's own rows come next
            store.db.conn.rollback()
        known = isinstance(exc, (LogSourceError, StoreError))
        note = f"log capture failed: {exc}" if known else f"log capture failed: {type(exc).__name__}: {exc}"
        echo(f"warning: {note}")
        return note
    return None


@contextlib.contextmanager
def measuring_commits(store: Store):
    """While measuring: every sample still committed on its own, but without an fsync per commit.

    In WAL mode ``synchronous = NORMAL`` keeps every committed row through
    a crash or kill of this process (the WAL is in the OS's hands); only a
    power loss or kernel crash can take back the rows since the last sync,
    which :func:`sync_point` bounds to one cell or load step. The fsync per
    sample was most of the runner's own milliseconds per request.
    """
    conn = store.db.conn
    try:
        before = int(conn.execute("pragma synchronous").fetchone()[0])
        conn.execute("pragma synchronous = NORMAL")
    except sqlite3.Error:
        before = None  # a store that cannot switch keeps syncing every commit
    try:
        yield
    finally:
        if before is not None:
            try:
                conn.execute(f"pragma synchronous = {before}")
            except sqlite3.Error:
                pass
        sync_point(store)


def sync_point(store: Store) -> None:
    """Sync the WAL to disk now (a passive checkpoint: never waits for readers)."""
    try:
        store.db.conn.execute("pragma wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error:
        pass  # a busy checkpoint is retried at the next sync point; nothing is lost by skipping one
