"""The memory section shows measured loads only: a canary's reload is no measured row.

The real run of tests/test_article_findings.py (real llama-server, real
SQLite, canaries on: the ``load_time`` canary evicts a model and reloads it
inside its own request). On this machine there is no NVIDIA driver, so the
section shows the server process's memory read on the host and the runtime's
self-report per load; the canary's reload must not be one of their rows, and
is named once as left out, linked to its log lines on the evidence page.
"""

from __future__ import annotations

import re
import shutil

from cardproof.daemon.store import open_store
from cardproof.report.memory import memory_view
from test_article_findings import _build  # noqa: F401


def _canary_loads(db, run_id):
    return [r[0] for r in db.execute(
        "select loads.id from loads join samples on samples.id = loads.sample_id where samples.kind = 'canary' "
        "and loads.run_id = ?", [run_id])]


def _loads(db, run_id):
    """Every load of the run with its status and error, for a failure's message."""
    return db.execute("select id, trigger, status, error_text from loads where run_id = ? and origin is null",
                      [run_id]).fetchall()


def test_canary_reload_is_no_memory_row(canary_run_db, tmp_path):  # noqa: F811
    db = open_store(canary_run_db, mode="ro").db
    run_id = db.execute("select max(id) from runs").fetchone()[0]
    canary = _canary_loads(db, run_id)
    assert canary, "the load_time canary reloads a model inside its request"
    # a load the router failed (CI saw one once, cause not kept) is no memory row either: it held no memory
    explicit = [r[0] for r in db.execute("select id from loads where run_id = ? and trigger = 'explicit' "
                                         "and origin is null and status not in ('failed', 'refused')", [run_id])]
    view = memory_view(db, run_id)
    assert explicit and [r["load_id"] for r in view["loads"]] == explicit, _loads(db, run_id)
    assert view["left_out_loads"] == canary
    en, de, _ = _build(canary_run_db, tmp_path / "p")
    whole = en[en.index("## Memory {#memory}"):]
    whole = whole[:whole.index("\n## ")]
    # the server process's memory, read on this host: one row per measured load, never the canary's reload
    process = whole[:whole.index("### Memory on the card")]
    measured = {int(lid) for lid in re.findall(r"^\| tiny-\w · load (\d+) \| \*\*[\d,]+\*\* \|", process,
                                               flags=re.M)}
    assert measured == set(explicit), (measured, explicit)
    section = whole[whole.index("### Memory on the card"):]
    # the self-report table has a row per load that printed its breakdown (at exit): never the canary's
    assert "· load" not in section  # the module's server has not exited yet: no breakdown, no table
    rows = re.findall(r"^\| (tiny-\w) · load (\d+)", section, flags=re.M)
    assert {int(lid) for _m, lid in rows} <= set(explicit), rows
    left = next(ln for ln in section.splitlines() if ln.startswith("Loads made by a canary or a probe"))
    assert all(f"[load {lid}](run-{run_id}-evidence.md#load-{lid})" in left for lid in canary), left
    assert "Ladevorgänge einer Kanarienprobe oder einer Prüfung sind keine Messung" in de
    evidence = (tmp_path / "p" / "site" / "runs" / f"run-{run_id}-evidence.md").read_text()
    assert all(f"{{#load-{lid}}}" in evidence for lid in canary)


def test_canary_reload_with_a_self_report_is_still_no_row(canary_run_db, tmp_path):  # noqa: F811
    """A copy of the real run with the breakdown llama-server prints at exit added for every load, as the demo
    stores it when its server stops (the module's server is still running): the canary's reload keeps no row."""
    copy = tmp_path / "exit.db"
    shutil.copy(canary_run_db, copy)
    store = open_store(copy)
    run_id = store.db.execute("select max(id) from runs").fetchone()[0]
    loads = [r[0] for r in store.db.execute("select id from loads where run_id = ? and origin is null "
                                            "and status not in ('failed', 'refused')", [run_id])]
    for lid in loads:
        store.db.execute("insert into memory_selfreports (run_id, load_id, ts, source, total_mib, gpu_mib, "
                         "items_json, kind, line_ids_json) values (?, ?, '2026-01-01T00:00:00+00:00', "
                         "'llama-server memory breakdown', 48.0, 0.0, '{}', 'exit', '[]')", [run_id, lid])
    store.db.conn.commit()
    canary = _canary_loads(store.db, run_id)
    every = _loads(store.db, run_id)
    store.close()
    en, _de, _ = _build(copy, tmp_path / "p")
    section = en[en.index("### Memory on the card"):]
    section = section[:section.index("\n## ")]
    rows = {int(lid) for lid in re.findall(r"^\| tiny-\w · load (\d+) \|", section, flags=re.M)}
    assert rows == set(loads) - set(canary) and canary, (rows, loads, canary, every)
