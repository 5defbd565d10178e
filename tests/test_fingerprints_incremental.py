"""Run fingerprints after a new run: a table that only gained rows has only those rows grouped by run
(report/fingerprints.py ``_per_run_stats``); the figures must equal grouping every row again, and a
table that lost or changed rows is grouped again whole.

Real SQLite, realistic generated runs (bench/report_data.py: samples, gate results, log lines, loads
with facts, probes, canaries).
"""

from __future__ import annotations

import sys
from pathlib import Path

from cardproof.daemon.store import open_store
from cardproof.report.fingerprints import _per_run_stats, _salts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from report_data import Generator  # noqa: E402


def _stats(db_path: Path, cache: Path | None) -> dict:
    store = open_store(db_path, mode="ro")
    try:
        return _per_run_stats(store.db, cache, _salts(store.db))
    finally:
        store.close()


def test_added_rows_are_folded_in_and_changed_tables_grouped_again(tmp_path, monkeypatch):
    db, cache = tmp_path / "b.db", tmp_path / "stats.json"
    gen = Generator(db, models=2, campaigns=2, log_lines=60)
    gen.add(4)
    assert _stats(db, cache) == _stats(db, None)
    gen.add(2)  # two new runs: every table gained rows only

    grouped = []
    from cardproof.report import fingerprints

    real = fingerprints._merged
    monkeypatch.setattr(fingerprints, "_merged", lambda runs, added: grouped.append(len(added)) or real(runs, added))
    incremental = _stats(db, cache)
    assert incremental == _stats(db, None)
    assert {"samples", "log_lines", "gate_results", "facts"} <= set(incremental)
    assert len(grouped) >= 4 and all(n <= 2 for n in grouped)  # only the new runs' rows were grouped

    # rows removed from an old run, a verdict flipped in place, a sample moved to another run:
    # not appended, so grouped again whole (the result equals a full grouping)
    store = open_store(db)
    with store.db.conn:
        first = store.db.execute("select min(id) from runs").fetchone()[0]
        store.db.execute("delete from log_lines where id in (select id from log_lines where run_id = ? limit 5)",
                         [first])
        store.db.execute("update gate_results set fired = 1 - fired where id = (select min(id) from gate_results)")
    store.close()
    gen.add(1)
    grouped.clear()
    after = _stats(db, cache)
    assert after == _stats(db, None)
    assert after["log_lines"][first][0] == incremental["log_lines"][first][0] - 5
    # every table a run's rows sit in is followed, read from the schema (report/row_owners.py)
    assert {"variants", "load_steps", "observed_requests", "cell_checks", "memory_load_pids"} <= set(after)


def test_a_store_without_change_records_is_read_by_its_rows_content(tmp_path):
    """A store whose triggers are gone: nothing records a row changed in place, so each run's rows are
    digested whole, and a verdict flipped in place changes its run's figures (and only its run's)."""
    db, cache = tmp_path / "b.db", tmp_path / "stats.json"
    gen = Generator(db, models=2, campaigns=1, log_lines=40)
    gen.add(3)
    assert _stats(db, cache) == _stats(db, None)
    store = open_store(db)
    with store.db.conn:
        for (name,) in store.db.execute("select name from sqlite_master where type = 'trigger'").fetchall():
            store.db.execute(f'drop trigger "{name}"')
    store.close()
    before = _stats(db, cache)
    store = open_store(db)
    with store.db.conn:
        sid, rid = store.db.execute("select id, run_id from samples where id = (select min(sample_id) from gate_results)").fetchone()
        store.db.execute("update gate_results set fired = 1 - fired where id = (select min(id) from gate_results)")
    store.close()
    after = _stats(db, cache)
    assert after == _stats(db, None)
    assert after["gate_results"][rid][0] == "content"
    assert [r for r in after["gate_results"] if after["gate_results"][r] != before["gate_results"][r]] == [rid]
