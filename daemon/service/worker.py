"""One queue entry, from claim to final status, in the daemon's worker thread.

Why a thread and not a child process: SIGTERM must let the current request
finish and be stored. A child running ``run_campaign`` in its main thread
would get the runner's own SIGTERM handler, which abandons the request in
flight. In a thread, the runner installs no handler; the daemon's main
thread catches the signal and the worker stops at the next sample boundary
(see progress.py). The worker has its own store connection.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.run.runner import EXIT_FAILED, run_campaign
from ..store import Store, StoreError, dumps, open_store, utcnow
from . import queue
from .config import DaemonConfig
from .progress import Progress
from .quiet import close_sources, sources_for, wait_for_quiet


@dataclass
class WorkResult:
    status: str  # queue status: done | failed | gave_up | queued (resumes later)
    reason: str | None
    run_id: int | None = None
    run_status: str | None = None
    written: bool = False  # the queue row already carries this status


def execute(db_path: Path, entry: queue.Entry, config: DaemonConfig, progress: Progress, daemon_id: int,
            *, sources_factory=None, log=None) -> WorkResult:
    """Run ``entry`` to a final (or re-queued) status and write that status itself.

    ``log`` receives the runner's progress lines (the journal, under systemd).
    """
    store = open_store(db_path)
    try:
        result = _execute(store, entry, config, progress, daemon_id, sources_factory, log)
        if not result.written:
            queue.finish(store, entry.id, result.status, result.reason)
        return result
    finally:
        store.close()


def _execute(store: Store, entry, config, progress, daemon_id, sources_factory, log) -> WorkResult:
    try:
        campaign = parse_campaign(entry.campaign_text, entry.campaign_path)
    except CampaignError as exc:  # validated at enqueue; a newer cardproof may disagree
        return WorkResult("failed", f"campaign no longer valid: {exc}")
    progress.begin(entry.id, campaign.name)
    require = config.quiet.enabled if entry.require_quiet is None else entry.require_quiet
    wait_id = None
    if require:
        waited = _wait_quiet(store, entry, campaign, config, progress, daemon_id, sources_factory)
        wait_id, outcome, reason = waited
        if outcome == "gave_up":
            return WorkResult("gave_up", reason)
        if outcome == "stopped":
            status, why = queue.requeue_or_fail(store, entry.id, entry.attempts, config.max_attempts,
                                                "stopped while waiting for quiet cards")
            return WorkResult(status, why, written=True)
    progress.set(phase="running", note=None)
    linked: dict[str, int] = {}

    def echo(line: str) -> None:
        if log:
            log(line)
        try:
            progress.echo(line)
        finally:
            run_id = progress.snapshot().run_id
            if run_id is not None and "run" not in linked:
                linked["run"] = run_id
                queue.link_run(store, entry.id, run_id, entry.attempts, daemon_id)
                if wait_id is not None:
                    store.update("quiet_waits", wait_id, {"run_id": run_id})

    try:
        outcome = run_campaign(store, campaign, echo=echo)
    except Exception as exc:  # a bug or a store failure: the run must not stay 'running'
        run_id = linked.get("run")
        text = f"{type(exc).__name__}: {exc}"
        if run_id is not None:
            _fail_run(store, run_id, text)
        return WorkResult("failed", f"the daemon's worker failed: {text}", run_id, "failed")
    if outcome.status == "completed":
        return WorkResult("done", f"run {outcome.run_id} completed: {outcome.measured}/{outcome.planned} samples "
                          f"({outcome.coverage:.0%} coverage), exit code {outcome.exit_code}",
                          outcome.run_id, outcome.status)
    if outcome.status == "interrupted":
        status, why = queue.requeue_or_fail(
            store, entry.id, entry.attempts, config.max_attempts,
            f"run {outcome.run_id} interrupted by SIGTERM at {outcome.measured}/{outcome.planned} samples",
        )
        return WorkResult(status, why, outcome.run_id, outcome.status, written=True)
    run = store.db["runs"].get(outcome.run_id)
    return WorkResult("failed", f"run {outcome.run_id} failed: {run['error_text']}", outcome.run_id, outcome.status)


def _fail_run(store: Store, run_id: int, text: str) -> None:
    row = store.db.execute(
        "select sum(error_kind is null), sum(error_kind is not null) from samples "
        "where run_id = ? and coalesce(kind, 'measure') = 'measure'", [run_id]).fetchone()
    planned = store.db["runs"].get(run_id)["samples_planned"] or 0
    measured = int(row[0] or 0)
    try:
        store.update("runs", run_id, {
            "status": "failed", "exit_code": EXIT_FAILED, "ended_at": utcnow(),
            "samples_measured": measured, "samples_failed": int(row[1] or 0),
            "coverage": measured / planned if planned else 0.0, "error_text": f"daemon worker: {text}",
        })
    except StoreError:
        pass  # the next start finds it 'running' and marks it interrupted


def _wait_quiet(store, entry, campaign, config, progress, daemon_id, sources_factory):
    q = config.quiet
    progress.set(phase="waiting_quiet", note=f"waiting for {q.quiet_s:g} s of quiet cards")
    sources = (sources_factory or (lambda c: sources_for(c.url, store.path, q.own_clients)))(campaign)
    wait_id = store.insert("quiet_waits", {
        "queue_id": entry.id, "daemon_id": daemon_id, "started_at": utcnow(), "outcome": "waiting",
        "quiet_s": q.quiet_s, "give_up_s": q.give_up_s, "sources_json": dumps([s.name for s in sources]),
    })
    try:
        res = wait_for_quiet(
            sources, quiet_s=q.quiet_s, give_up_s=q.give_up_s, poll_s=q.poll_s,
            max_tokens=q.max_foreign_tokens, max_requests=q.max_foreign_requests, blocked=q.blocked_clients,
            stop=progress.stop_requested, on_poll=lambda text: progress.set(note=text),
        )
    finally:
        close_sources(sources)
    store.update("quiet_waits", wait_id, {
        "ended_at": utcnow(), "outcome": res.outcome, "waited_s": res.waited_s,
        "foreign_tokens": res.total.tokens, "foreign_requests": res.total.requests,
        "foreign_loads": res.total.loads, "clients_json": dumps(res.total.clients),
        "blocked_seen_json": dumps(res.blocked_seen), "gpu_pids_json": dumps(res.total.gpu_pids),
        "per_minute_json": dumps(res.per_minute), "reason": res.reason,
    })
    return wait_id, res.outcome, res.reason


class Worker(threading.Thread):
    """The thread that runs one entry; ``result`` is set when it ends."""

    def __init__(self, db_path: Path, entry: queue.Entry, config: DaemonConfig, progress: Progress,
                 daemon_id: int, on_done=None, log=None):
        super().__init__(name=f"cardproof-campaign-{entry.id}", daemon=True)
        self.args = (db_path, entry, config, progress, daemon_id)
        self.log = log
        self.entry = entry
        self.result: WorkResult | None = None
        self.error: str | None = None
        self._on_done = on_done

    def run(self) -> None:
        try:
            self.result = execute(*self.args, log=self.log)
        except BaseException as exc:  # recorded by the main loop; a thread's exception is otherwise lost
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if self._on_done:
                self._on_done()
