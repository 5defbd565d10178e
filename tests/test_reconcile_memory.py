"""The memory reconciliation: the runtime's self-report for the cards against its buffers in host memory.

The real run of tests/test_article_findings.py (real llama-server on CPU,
real SQLite, its log captured, canaries on so tiny-b is loaded twice). The
module's server is still running, so the breakdown llama-server prints at
exit is not in the log yet: a copy of the database gets the self-report row
the demo stores at exit (0 MiB on the cards), per load. The buffer figures
are the real log's facts.
"""

from __future__ import annotations

import shutil

from cardproof.daemon.store import open_store
from cardproof.report.i18n import Lang
from test_article_findings import _build  # noqa: F401


def _with_selfreport(src, dst, gpu_mib: float):
    shutil.copy(src, dst)
    store = open_store(dst)
    run_id = store.db.execute("select max(id) from runs").fetchone()[0]
    loads = [r[0] for r in store.db.execute("select id from loads where run_id = ? and origin is null", [run_id])]
    for lid in loads:
        store.db.execute("insert into memory_selfreports (run_id, load_id, ts, source, total_mib, gpu_mib, items_json, "
                         "kind, line_ids_json) values (?, ?, '2026-01-01T00:00:00+00:00', "
                         "'llama-server memory breakdown', 48.0, ?, '{}', 'exit', '[]')", [run_id, lid, gpu_mib])
    store.db.conn.commit()
    store.close()
    return run_id


def _host_mib(db, load_id: int) -> float:
    """CPU buffers of one load as its log lines state them (main and draft model)."""
    return db.execute(
        "select coalesce(sum(value_num), 0) from facts where load_id = ? and name like '%buffer_mib' "
        "and upper(device) like '%CPU%'", [load_id]).fetchone()[0]


def test_self_report_against_host_buffers_counts_each_load_once(canary_run_db, tmp_path):  # noqa: F811
    copy = tmp_path / "sr.db"
    run_id = _with_selfreport(canary_run_db, copy, 0.0)
    db = open_store(copy, mode="ro").db
    measured = dict(db.execute(
        "select models.name, loads.id from loads join models on models.id = model_id where run_id = ? "
        "and trigger = 'explicit' and origin is null", [run_id]).fetchall())
    canary = [r[0] for r in db.execute("select loads.id from loads join samples on samples.id = loads.sample_id "
                                       "where samples.kind = 'canary' and loads.run_id = ?", [run_id])]
    assert canary and set(measured) == {"tiny-a", "tiny-b"}
    # log facts of merged log loads belong to the runner's load: read them where the evidence does
    en, de, _ = _build(copy, tmp_path / "p")
    part = en[en.index("### Figures that count different things"):]
    L = Lang("en")
    for model, lid in measured.items():
        host = _host_mib(db, lid)
        assert host > 0, (model, lid)
        item = next(ln for ln in part.splitlines() if ln.startswith(f"- **Memory: the cards against host memory** "
                                                                   f"— {model}:"))
        assert f"the runtime reports 0 MiB for the cards, while its log lists {L.num(host, 0)} MiB of buffers " \
               f"in host memory (CPU)" in item, (item, host)
    # the canary's reload is not added to the model that was reloaded
    assert part.count("- **Memory: the cards against host memory**") == 2
    assert de.count("**Speicher: die Karten gegenüber dem Hauptspeicher**") == 2


def test_a_self_report_that_covers_the_buffers_needs_no_reconciliation(canary_run_db, tmp_path):  # noqa: F811
    copy = tmp_path / "covered.db"
    _with_selfreport(canary_run_db, copy, 100000.0)
    en, _de, _ = _build(copy, tmp_path / "p")
    assert "Memory: the cards against host memory" not in en
