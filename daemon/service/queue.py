"""The campaign queue in the database, and recovery after a crash.

Another process enqueues by inserting a row; the daemon polls. The campaign
text is frozen at enqueue time, so a file edited later cannot change what
runs. A resumed campaign is always a new run: the interrupted run keeps its
samples and its coverage, and nothing is ever copied or written twice.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cardproof.daemon.campaign.model import Campaign
from cardproof.daemon.run.runner import EXIT_INTERRUPTED
from ..store import Store, utcnow

FINAL = ("done", "failed", "gave_up", "cancelled")


@dataclass
class Entry:
    id: int
    campaign_path: str
    campaign_name: str
    campaign_text: str
    attempts: int
    require_quiet: bool | None


def _who() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in a container: the uid says enough
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def enqueue(store: Store, campaign: Campaign, *, require_quiet: bool | None = None) -> int:
    """Queue a validated campaign; returns the queue id."""
    return store.insert(
        "daemon_queue",
        {
            "campaign_path": str(Path(campaign.path).resolve()) if campaign.path else None,
            "campaign_name": campaign.name,
            "campaign_sha256": campaign.sha256,
            "campaign_text": campaign.text,
            "enqueued_at": utcnow(),
            "enqueued_by": _who(),
            "status": "queued",
            "attempts": 0,
            "require_quiet": None if require_quiet is None else int(require_quiet),
        },
    )


def claim_next(store: Store) -> Entry | None:
    """Take the oldest queued entry and mark it running (one statement: no double claim)."""
    with store.db.conn:
        row = store.db.execute(
            "select id from daemon_queue where status = 'queued' order by id limit 1"
        ).fetchone()
        if row is None:
            return None
        cur = store.db.execute(
            "update daemon_queue set status = 'running', attempts = coalesce(attempts, 0) + 1, "
            "started_at = ?, reason = null where id = ? and status = 'queued'",
            [utcnow(), row[0]],
        )
        if cur.rowcount != 1:
            return None
    r = store.db["daemon_queue"].get(row[0])
    rq = r["require_quiet"]
    return Entry(r["id"], r["campaign_path"] or "<queued>", r["campaign_name"], r["campaign_text"],
                 r["attempts"], None if rq is None else bool(rq))


def link_run(store: Store, queue_id: int, run_id: int, attempt: int, daemon_id: int | None) -> None:
    """Record which run an attempt produced, the moment the runner names it."""
    with store.db.conn:
        store.db["daemon_queue_runs"].insert(
            {"queue_id": queue_id, "run_id": run_id, "attempt": attempt, "daemon_id": daemon_id,
             "started_at": utcnow()}
        )
        store.db["daemon_queue"].update(queue_id, {"last_run_id": run_id})


def finish(store: Store, queue_id: int, status: str, reason: str | None = None) -> None:
    """Set a final status (or back to 'queued' to resume later) with its reason."""
    values = {"status": status, "reason": reason}
    if status in FINAL:
        values["finished_at"] = utcnow()
    store.update("daemon_queue", queue_id, values)


def requeue_or_fail(store: Store, queue_id: int, attempts: int, max_attempts: int, why: str) -> tuple[str, str]:
    """After an interruption: queue again for a new run, unless it was interrupted too often.

    Returns the status and reason written.
    """
    if attempts >= max_attempts:
        status, reason = "failed", f"{why}; interrupted {attempts} times, not resumed again"
    else:
        status, reason = "queued", f"{why}; resumes as a new run (attempt {attempts + 1} of {max_attempts})"
    finish(store, queue_id, status, reason)
    return status, reason


def cancel(store: Store, queue_id: int) -> bool:
    """Cancel a queued entry; a running one is stopped by stopping the daemon."""
    with store.db.conn:
        cur = store.db.execute(
            "update daemon_queue set status = 'cancelled', finished_at = ?, reason = ? "
            "where id = ? and status = 'queued'",
            [utcnow(), f"cancelled by {_who()}", queue_id],
        )
    return cur.rowcount == 1


def boot_time() -> float | None:
    """Seconds since the epoch at which this machine booted (Linux), else None."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def _counts(store: Store, run_id: int) -> tuple[int, int, str | None]:
    row = store.db.execute(
        "select sum(error_kind is null), sum(error_kind is not null), max(started_at) from samples "
        "where run_id = ? and coalesce(kind, 'measure') = 'measure'",
        [run_id],
    ).fetchone()
    return int(row[0] or 0), int(row[1] or 0), row[2]


def recover(store: Store, *, daemon_id: int, max_attempts: int, last_heartbeat: str | None) -> list[dict]:
    """At start: close what a killed daemon left open. Returns what was done, for the record.

    Runs the daemon owns (linked to a queue entry) and still 'running' cannot be
    running any more (we hold the daemon lock), so they become 'interrupted' --
    never 'completed' -- with coverage counted from their stored samples.
    Runs of a foreground ``cardproof run`` are left alone unless they started
    before this machine booted. Queue entries left 'running' go back to the queue.
    """
    done: list[dict] = []
    btime = boot_time()
    done += _adopt_unlinked(store, daemon_id)
    owned = {r[0] for r in store.db.execute("select run_id from daemon_queue_runs")}
    for run in store.db.query("select id, started_at, samples_planned from runs where status = 'running'"):
        started = datetime.fromisoformat(run["started_at"]).timestamp() if run["started_at"] else None
        before_boot = btime is not None and started is not None and started < btime
        if run["id"] not in owned and not before_boot:
            done.append({"run_id": run["id"], "action": "left running",
                         "why": "not started by the daemon; it may be a foreground run in progress"})
            continue
        measured, failed, last_sample = _counts(store, run["id"])
        planned = run["samples_planned"] or 0
        why = "the daemon was killed (SIGKILL, crash or power loss) during the run" if run["id"] in owned \
            else "the run started before the machine last booted"
        # the real end is unknown: the last sign of life is the latest we can say
        ended = max(filter(None, [last_sample, last_heartbeat if run["id"] in owned else None]), default=None)
        store.update("runs", run["id"], {
            "status": "interrupted",
            "exit_code": EXIT_INTERRUPTED,
            "samples_measured": measured,
            "samples_failed": failed,
            "coverage": measured / planned if planned else 0.0,
            "ended_at": ended,
            "error_text": (f"interrupted: found 'running' when daemon {daemon_id} started at {utcnow()}: {why}; "
                           f"ended_at is the last sign of life, not the moment it stopped"),
        })
        done.append({"run_id": run["id"], "action": "marked interrupted", "measured": measured,
                     "planned": planned, "why": why})
    for q in store.db.query("select id, attempts from daemon_queue where status = 'running'"):
        new, _ = requeue_or_fail(store, q["id"], q["attempts"] or 0, max_attempts,
                                 "the daemon stopped without finishing it")
        done.append({"queue_id": q["id"], "action": f"queue entry {new}"})
    return done


def _adopt_unlinked(store: Store, daemon_id: int) -> list[dict]:
    """Link runs a killed worker created but had not linked yet.

    The runner inserts the run row a moment before the daemon learns its id;
    a kill in between leaves a 'running' run with no queue link. It belongs to
    the queue entry that was running: same campaign text, started after the
    entry was claimed, not linked to anything.
    """
    out = []
    rows = store.db.execute(
        "select q.id, q.attempts, r.id from daemon_queue q "
        "join campaigns c on c.sha256 = q.campaign_sha256 "
        "join runs r on r.campaign_id = c.id "
        "where q.status = 'running' and r.status = 'running' and r.started_at >= q.started_at "
        "and r.id not in (select run_id from daemon_queue_runs)"
    ).fetchall()
    previous = store.db.execute("select max(id) from daemon_state where id < ?", [daemon_id]).fetchone()[0]
    for queue_id, attempts, run_id in rows:
        link_run(store, queue_id, run_id, attempts or 0, previous)
        out.append({"run_id": run_id, "queue_id": queue_id, "action": "linked to its queue entry",
                    "why": "killed between the run's first row and its link"})
    return out
