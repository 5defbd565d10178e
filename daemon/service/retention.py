"""Retention: the database must not grow without bound under a 1 Hz sampler.

Two rules, both about what is old and idle:

* memory samples older than ``memory_downsample_after_h`` are thinned to one
  reading per ``memory_bucket_s``: the tick whose device memory was highest
  (peaks are what a reader of memory numbers cares about). A tick is kept
  whole -- its device and process rows together -- so a kept reading still
  adds up. Rows taken during a run are kept unless ``keep_run_rows`` is off.
* log lines older than ``log_lines_keep_days`` are deleted unless something
  points at them: a fact (kept forever: a number in a report links to it), a
  request seen in the access log, a memory self-report, or -- with
  ``keep_run_rows`` -- a run or a load.

Everything happens in one transaction per rule; a crash leaves either the old
or the new state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..store import Store
from .config import RetentionConfig


@dataclass
class RetentionResult:
    memory_rows_deleted: int
    memory_ticks_kept: int
    log_lines_deleted: int
    log_lines_without_ts: int  # cannot be aged; reported, never guessed


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="microseconds")


def downsample_memory(store: Store, *, older_than: datetime, bucket_s: int, keep_run_rows: bool = True) -> tuple[int, int]:
    """Keep the peak tick per bucket among old rows; returns (rows deleted, ticks kept)."""
    db = store.db
    scope = "ts < ?" + (" and run_id is null" if keep_run_rows else "")
    cutoff = [_iso(older_than)]
    with db.conn:
        db.execute("drop table if exists temp.retention_ticks")
        # one row per tick (timestamp): its bucket and its device memory
        db.execute(
            "create temp table retention_ticks as "
            "select ts, cast(strftime('%s', ts) as integer) / ? as bucket, "
            "coalesce(sum(case when scope = 'device' then used_mib end), -1) as device_mib "
            f"from memory_samples where {scope} group by ts",
            [bucket_s, *cutoff],
        )
        # SQLite returns the other columns of the row that holds max(): the peak tick
        db.execute(
            "create temp table retention_keep as "
            "select ts, max(device_mib) from retention_ticks group by bucket"
        )
        kept = db.execute("select count(*) from retention_keep").fetchone()[0]
        cur = db.execute(
            f"delete from memory_samples where {scope} and ts in (select ts from retention_ticks) "
            "and ts not in (select ts from retention_keep)",
            cutoff,
        )
        deleted = cur.rowcount
        db.execute("drop table temp.retention_ticks")
        db.execute("drop table temp.retention_keep")
    return deleted, kept


def _referenced_line_ids_sql(db) -> str:
    parts = ["select line_id from facts where line_id is not null"]
    names = set(db.table_names())
    if "requests_seen" in names:
        parts.append("select line_id from requests_seen where line_id is not null")
    if "memory_selfreports" in names and "line_ids_json" in db["memory_selfreports"].columns_dict:
        parts.append("select j.value from memory_selfreports m, json_each(m.line_ids_json) j "
                     "where m.line_ids_json is not null and json_valid(m.line_ids_json)")
    return " union ".join(parts)


def prune_log_lines(store: Store, *, older_than: datetime, keep_run_rows: bool = True) -> tuple[int, int]:
    """Delete old, unreferenced log lines; returns (deleted, lines without a timestamp)."""
    db = store.db
    extra = " and run_id is null and load_id is null" if keep_run_rows else ""
    with db.conn:
        cur = db.execute(
            f"delete from log_lines where ts is not null and ts < ?{extra} "
            f"and id not in ({_referenced_line_ids_sql(db)})",
            [_iso(older_than)],
        )
        deleted = cur.rowcount
    no_ts = db.execute("select count(*) from log_lines where ts is null").fetchone()[0]
    return deleted, no_ts


def apply_retention(store: Store, cfg: RetentionConfig, *, now: datetime | None = None) -> RetentionResult:
    """Apply both rules as of ``now`` (UTC); returns what was removed."""
    now = now or datetime.now(timezone.utc)
    mem_deleted, ticks = downsample_memory(
        store, older_than=now - timedelta(hours=cfg.memory_downsample_after_h),
        bucket_s=cfg.memory_bucket_s, keep_run_rows=cfg.keep_run_rows,
    )
    lines_deleted, no_ts = prune_log_lines(
        store, older_than=now - timedelta(days=cfg.log_lines_keep_days), keep_run_rows=cfg.keep_run_rows,
    )
    return RetentionResult(mem_deleted, ticks, lines_deleted, no_ts)


class RetentionCollector:
    """Runs retention every ``interval_h`` while no campaign is running."""

    name = "retention"

    def __init__(self, cfg: RetentionConfig):
        self.cfg = cfg
        self.ctx = None
        self._next = 0.0
        self.last: dict | None = None

    def start(self, ctx) -> None:
        self.ctx = ctx

    def tick(self, now: float) -> None:
        # deletes would compete with a running campaign's writes: wait until idle
        if now < self._next or self.ctx.progress.snapshot().phase != "idle":
            return
        self._next = now + self.cfg.interval_h * 3600
        r = apply_retention(self.ctx.store, self.cfg)
        self.last = {"at": _iso(datetime.now(timezone.utc)), **r.__dict__}

    def stop(self) -> None:
        pass

    def status(self) -> dict:
        return {"state": "running", **({"last": self.last} if self.last else {})}
