"""One bad row or log line never stops a build: it is named on stderr and the rest is built.

The database comes from a real run against the real llama-server; the
damage is then done by hand in SQL, as an old cardproof, a merge or a
careless edit could have left it. The build is the real ``cardproof report
build`` with ``mkdocs build --strict``.
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.access import parse_access
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.i18n import Lang
from conftest import campaign_text


@pytest.fixture(scope="module")
def run_db(llama_server, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("tol") / "t.db"
    store = open_store(db)
    camp = parse_campaign(
        campaign_text(llama_server.url, models=("tiny-b",), classes=("short",), reps=5, max_tokens=8)
        + "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n", "tol.toml")
    assert run_campaign(store, camp, echo=lambda s: None).exit_code == 0
    store.close()
    return db


def _counted(db: Path) -> tuple[int, list[float]]:
    """The cell and the decode rates its median is made of (answered, numeric, no excluding gate)."""
    from cardproof.daemon.gates import GATES

    excluding = [g for g, gate in GATES.items() if gate.default_exclude and g not in ("length_limit", "not_on_card")]
    store = open_store(db)
    cell = store.db.execute("select id from cells where kind = 'measure'").fetchone()[0]
    vals = [r[0] for r in store.db.execute(
        f"""select decode_tps from samples where cell_id = ? and error_kind is null and typeof(decode_tps) = 'real'
           and abs(decode_tps) < 1e15 and id not in (select sample_id from gate_results where fired = 1
           and gate in ({",".join("?" * len(excluding))}))""", [cell, *excluding])]
    store.close()
    return cell, vals


def _build(db: Path, project: Path):
    return CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])


def test_damaged_rows_are_named_on_stderr_and_the_rest_is_built(run_db, tmp_path):
    db = tmp_path / "damaged.db"
    shutil.copy(run_db, db)
    store = open_store(db)
    ids = [r[0] for r in store.db.execute("select id from samples where kind = 'measure' order by id")]
    run_id = store.db.execute("select id from runs").fetchone()[0]
    load_id = store.db.execute("select max(id) from loads").fetchone()[0]
    with store.db.conn:
        for sql, args in [
            ("update samples set decode_tps = 'abc' where id = ?", [ids[0]]),
            ("update samples set prefill_tps = 9e999 where id = ?", [ids[1]]),  # +inf
            ("update samples set ttft_ms = 1e300 where id = ?", [ids[2]]),
            ("update samples set response_json = '{not json' where id = ?", [ids[3]]),
            ("update samples set request_json = '[1, 2]' where id = ?", [ids[3]]),
            ("update samples set started_at = 'abc' where id = ?", [ids[4]]),
            ("update runs set server_props_json = 'nope', started_at = 'abc' where id = ?", [run_id]),
            # valid JSON of an older or odd shape: not damage to report, but no reason to fail either
            ("""update runs set gpus_json = '{"gpus": ["x", {"memory_total_mib": "big"}, {"name": "RTX 9"}]}'
                where id = ?""", [run_id]),
            ("update loads set ready_at = '2025-02-30T00:00:00', load_seconds = 'fast' where id = ?", [load_id]),
            ("update cells set max_tokens = 'eight'", []),
        ]:
            store.db.execute(sql, args)
    store.close()
    cell, vals = _counted(db)
    assert 1 <= len(vals) <= 4  # the sample with text in decode_tps is one of those left out

    result = _build(db, tmp_path / "site")
    assert result.exit_code == 0, result.output
    err = result.stderr
    for named in (f"samples row {ids[0]}: decode_tps", f"samples row {ids[1]}: prefill_tps",
                  f"samples row {ids[2]}: ttft_ms", f"samples row {ids[3]}: response_json",
                  f"samples row {ids[3]}: request_json", f"samples row {ids[4]}: started_at",
                  f"runs row {run_id}: server_props_json",
                  f"runs row {run_id}: started_at", f"loads row {load_id}: ready_at",
                  f"loads row {load_id}: load_seconds", "cells row"):
        assert named in err, (named, err)
    assert "'abc'" in err and "'{not json'" in err and "inf" in err
    # the good figures: the median over the samples that are still numbers
    md = (tmp_path / "site" / "site" / "runs" / f"run-{run_id}.md").read_text()
    for lang in ("en", "de"):
        L = Lang(lang)
        text = md if lang == "en" else (tmp_path / "site" / "site" / "runs" / f"run-{run_id}.de.md").read_text()
        # the main table's cell: the median linking to its row on the evidence page, min–max and n below it
        expected = (f"[{L.num(statistics.median(vals))}](run-{run_id}-evidence.md#cell-{cell})"
                    f"<br><small>{L.num(min(vals))}–{L.num(max(vals))} · n={len(vals)}</small>")
        assert expected in text.replace("\\", ""), (lang, expected)  # whatever Markdown escaping is added
    assert "`abc`" in md  # a start time that is no date is shown as the text it is
    assert "RTX 9" in md
    built = tmp_path / "site" / "build" / "site" / "runs"  # pages are name.html (use_directory_urls: false)
    assert (built / f"run-{run_id}.html").exists()
    assert f'id="cell-{cell}"' in (built / f"run-{run_id}-evidence.html").read_text()  # the median's link target
    # the file itself is untouched: the report only reads
    store = open_store(db)
    assert store.db.execute("select decode_tps from samples where id = ?", [ids[0]]).fetchone()[0] == "abc"
    store.close()


def test_an_impossible_access_log_date_is_kept_as_text_with_its_reason_and_the_site_builds(run_db, tmp_path):
    db = tmp_path / "gin.db"
    shutil.copy(run_db, db)
    run_id = open_store(db).db.execute("select id from runs").fetchone()[0]
    log = tmp_path / "ollama.log"
    log.write_text(
        '[GIN] 2025/08/07 - 18:27:18 | 200 |       1m16s |     192.168.1.5 | POST     "/api/chat"\n'
        '[GIN] 2025/13/45 - 99:99:99 | 200 |        2.1s |     192.168.1.6 | POST     "/api/chat"\n'
        '[GIN] 2025/02/30 - 10:00:00 | 200 |        2.1s |     192.168.1.6 | POST     "/api/chat"\n')
    result = CliRunner().invoke(cli, ["logs", "import", str(log), "--run", str(run_id), "--db", str(db)])
    assert result.exit_code == 0, result.output
    store = open_store(db)
    rows = store.db.execute("select ts, ts_note, client from requests_seen order by id").fetchall()
    store.close()
    assert rows[0] == ("2025-08-07T18:27:18", None, "192.168.1.5")
    assert rows[1][0] == "2025/13/45 - 99:99:99" and "month must be in 1..12" in rows[1][1]
    assert rows[2][0] == "2025/02/30 - 10:00:00" and "day is out of range" in rows[2][1]
    result = _build(db, tmp_path / "site")
    assert result.exit_code == 0, result.output
    html = (tmp_path / "site" / "build" / "site" / "runs" / f"run-{run_id}.html").read_text()
    assert "2025/13/45 - 99:99:99" in html or "2025/02/30 - 10:00:00" in html
    # a stored reason is the explanation: the row is not reported again as damage
    assert "requests_seen" not in result.stderr


def test_gin_time_is_a_date_or_the_printed_text_with_the_reason():
    ok = parse_access('[GIN] 2024/02/29 - 23:59:59 | 200 | 1s | 10.0.0.1 | GET "/api/tags"')
    assert (ok.logged_time, ok.time_note) == ("2024-02-29T23:59:59", None)
    bad = parse_access('[GIN] 2025/00/10 - 24:00:00 | 200 | 1s | 10.0.0.1 | GET "/api/tags"')
    assert bad.logged_time == "2025/00/10 - 24:00:00" and bad.time_note.startswith("not a date: ")


@pytest.mark.parametrize("value", ["abc", "2025-13-45T99:99:99", "2025/13/45 - 99:99:99", "2025-02-30T00:00:00",
                                   "`x` <b>", 12345, 1e300, "9999-12-31T23:59:59+14:00", "0001-01-01T00:00:00-14:00"])
def test_date_and_number_formatters_take_any_value(value):
    for lang in ("en", "de"):
        L = Lang(lang)
        shown = L.datetime(value)
        assert isinstance(shown, str) and shown
        assert "<b>" not in shown or shown.startswith("`")  # foreign text only inside a code span
        for f in (L.num, L.pct, L.signed_pct, L.size):
            assert isinstance(f(value if not isinstance(value, float) else float("inf")), str)
    assert Lang("en").datetime("2025-08-07T18:27:18.5+02:00") == "2025-08-07 16:27:18 UTC"
    assert Lang("en").num("abc") == "—" and Lang("en").num(True) == "—"


@pytest.mark.parametrize("prefix, ts", [("0001-01-01T00:00:00+05:00", None), ("9999-12-31T23:59:59-05:00", None),
                                        ("2026-13-45T99:99:99Z", None), ("2025-02-30 10:00:00", None),
                                        ("0001-01-01 00:00:00.5 | ", "0001-01-01T00:00:00.500000")])
def test_a_log_line_whose_prefix_time_cannot_be_placed_is_stored_without_a_stamp(prefix, ts, tmp_path):
    """Container and journald prefixes: a date at the calendar's edge or none at all never stops the import."""
    from cardproof.daemon.logs import import_path

    log = tmp_path / "server.log"
    log.write_text(f"{prefix} srv  load_model: loading model\n2025-08-07T18:27:18Z main: server is listening\n")
    store = open_store(tmp_path / "p.db")
    import_path(store, log)
    rows = store.db.execute("select raw, ts from log_lines order by id").fetchall()
    store.close()
    assert [r[0] for r in rows] == log.read_text().splitlines()
    assert rows[0][1] == ts


def _samples_table(conn, n: int) -> None:
    conn.execute("create table samples (id integer primary key, decode_tps real, request_json text)")
    conn.executemany("insert into samples (decode_tps, request_json) values (?, ?)",
                     [(10.0 + i, '{"n": %d}' % i) for i in range(n)])


def test_the_damage_memo_scans_new_rows_and_a_changed_table_whole():
    """report/tolerance.py: a table found clean up to a row is scanned from there on while its rows up to it
    are unchanged in number and last row; new damage is named, and any change below the memo means a whole scan."""
    import sqlite3

    from cardproof.report.tolerance import find_damage

    conn = sqlite3.connect(":memory:")
    _samples_table(conn, 100)
    memo: dict = {}
    named: list[str] = []
    assert find_damage(conn, named.append, memo) == {} and not named
    assert memo["samples"]["upto"] == 100 and memo["samples"]["rows"] == 100 and memo["samples"]["last"]
    # a new damaged row: found by the scan of the new rows, named, and the table loses its memo
    conn.execute("insert into samples (decode_tps, request_json) values ('abc', '{}')")
    out = find_damage(conn, named.append, memo)
    assert ("samples", "decode_tps") in out and any("samples row 101: decode_tps" in n for n in named)
    assert "samples" not in memo
    conn.execute("update samples set decode_tps = 1.0 where id = 101")
    find_damage(conn, named.append, memo)
    assert memo["samples"]["upto"] == 101
    # below the memo: a row gone (the count differs) -> the whole table again, old damage named
    named.clear()
    conn.execute("delete from samples where id = 10")
    conn.execute("update samples set request_json = '{broken' where id = 20")
    out = find_damage(conn, named.append, memo)
    assert ("samples", "request_json") in out and any("samples row 20: request_json" in n for n in named)
    # the memo's last row changed -> whole scan
    conn.execute("update samples set request_json = '{}' where id = 20")
    find_damage(conn, named.append, memo)
    named.clear()
    conn.execute("update samples set decode_tps = 'x', request_json = '{\"n\": 0}' where id = 101")
    assert ("samples", "decode_tps") in find_damage(conn, named.append, memo)
    # a memo of the wrong shape is no memo
    conn.execute("update samples set decode_tps = 2.0 where id = 101")
    conn.execute("update samples set decode_tps = 'y' where id = 5")
    for bad in ({"upto": "many"}, {"rows": 3}, None, [1, 2], {"upto": -1, "rows": 0, "last": None}):
        named.clear()
        assert ("samples", "decode_tps") in find_damage(conn, named.append, {"samples": bad})


def test_with_the_stores_change_counts_an_old_row_edited_by_hand_is_found():
    """Where the store counts changed rows per bucket of rowids (daemon/store/migrations.py m022), the memo
    keeps that count below its last bucket: new rows (and a new run's rows updated during its capture)
    are scanned from the last bucket on, and an old row edited in place is found by a whole scan (the
    row-count memo does not see such an edit)."""
    import sqlite3

    import sqlite_utils

    from cardproof.daemon.store.migrations import ROW_CHANGE_BITS, m022_row_changes
    from cardproof.report import tolerance
    from cardproof.report.tolerance import find_damage

    conn = sqlite3.connect(":memory:")
    _samples_table(conn, 3 * (1 << ROW_CHANGE_BITS))
    m022_row_changes(sqlite_utils.Database(conn))
    memo: dict = {}
    named: list[str] = []
    assert find_damage(conn, named.append, memo) == {} and not named
    assert memo["samples"]["changes_below"] == 0 and "rows" not in memo["samples"]
    scanned_from = []
    real = tolerance._clean_upto
    tolerance._clean_upto = lambda *a: scanned_from.append(real(*a)) or scanned_from[-1]
    try:
        # new rows, one of them updated after it was written (as a capture does): scanned from the last bucket
        conn.executemany("insert into samples (decode_tps, request_json) values (?, '{}')", [(1.0,)] * 10)
        conn.execute("update samples set decode_tps = 'fast' where id = (select max(id) from samples)")
        out = find_damage(conn, named.append, memo)
        assert ("samples", "decode_tps") in out
        upto = 3 * (1 << ROW_CHANGE_BITS)  # the memo's last row: the first of the fourth bucket
        assert scanned_from[-1] == ((upto >> ROW_CHANGE_BITS) << ROW_CHANGE_BITS) - 1  # that bucket on
        conn.execute("update samples set decode_tps = 2.0 where decode_tps = 'fast'")
        assert find_damage(conn, named.append, memo) == {}
        # an old row edited by hand: counted, so the whole table is scanned and the damage named
        named.clear()
        conn.execute("update samples set request_json = '{broken' where id = 7")
        out = find_damage(conn, named.append, memo)
        assert scanned_from[-1] == 0
        assert ("samples", "request_json") in out and any("samples row 7: request_json" in n for n in named)
    finally:
        tolerance._clean_upto = real


def test_a_build_remembers_the_clean_tables_and_still_names_a_new_damaged_row(run_db, tmp_path):
    """The real build: its memo beside the pages; a sample added with text for a number after it is named and
    read as NULL; the store replaced by another file (same path, other inode) is scanned whole."""
    import json
    import sqlite3

    db = tmp_path / "m.db"
    shutil.copy(run_db, db)
    project = tmp_path / "site"
    assert _build(db, project).exit_code == 0
    memo = json.loads((project / "site" / ".cardproof-damage-checked.json").read_text())
    conn = sqlite3.connect(db)
    last = conn.execute("select max(id) from samples").fetchone()[0]
    assert memo["tables"]["samples"]["upto"] == last
    cols = [r[1] for r in conn.execute("pragma table_info(samples)") if r[1] != "id"]
    with conn:
        conn.execute(f"insert into samples ({', '.join(cols)}) select {', '.join(cols)} from samples where id = ?",
                     [last])
        conn.execute("update samples set decode_tps = 'fast' where id = ?", [last + 1])
    conn.close()
    result = _build(db, project)
    assert result.exit_code == 0, result.output
    assert f"samples row {last + 1}: decode_tps" in result.stderr
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("update samples set decode_tps = 1.5 where id = ?", [last + 1])
    conn.close()
    assert _build(db, project).exit_code == 0
    memo = json.loads((project / "site" / ".cardproof-damage-checked.json").read_text())
    assert memo["tables"]["samples"]["upto"] == last + 1
    # an old row damaged in place, and the store file replaced by that copy: another file, scanned whole
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    conn = sqlite3.connect(copy)
    with conn:
        conn.execute("update samples set ttft_ms = 'slow' where id = ?", [last - 1])
    conn.close()
    copy.replace(db)
    result = _build(db, project)
    assert result.exit_code == 0, result.output
    assert f"samples row {last - 1}: ttft_ms" in result.stderr
