"""Trend pages written from generated databases (real SQLite, real templates and charts)."""

from __future__ import annotations

import re

from cardproof.daemon.store import open_store
from cardproof.report.history.render import write_trends
from history_data import make_db


def _write(db_path, project):
    store = open_store(db_path, mode="ro")
    try:
        return write_trends(store.db, project)
    finally:
        store.close()


def test_a_step_is_told_in_both_languages_with_both_runs_linked(tmp_path):
    runs = [{"level": 100.0, "build": "b7342"}] * 5 + [{"level": 88.0, "build": "b7401"}] * 5
    ids = make_db(tmp_path / "h.db", runs)
    written = _write(tmp_path / "h.db", tmp_path / "p")
    trends = tmp_path / "p" / "site" / "trends"
    assert {p.name for p in written} == {"trend-nightly-tiny-a.md", "trend-nightly-tiny-a.de.md", "index.md",
                                         "index.de.md"}
    en = (trends / "trend-nightly-tiny-a.md").read_text()
    de = (trends / "trend-nightly-tiny-a.de.md").read_text()
    before, after = f"[run {ids[4]}](../runs/run-{ids[4]}.md) (build b7342)", f"[run {ids[5]}](../runs/run-{ids[5]}.md)"
    assert "decode of tiny-a (short · reasoning off) fell 1" in en and before in en and after in en
    assert "and stayed there for 5 runs" in en and "server build b7342 → b7401" in en
    assert "Decode von tiny-a (kurz · Reasoning aus) sank zwischen" in de
    assert f"[Lauf {ids[4]}](../runs/run-{ids[4]}.md) (Build b7342)" in de and "über 5 Läufe" in de
    # every point of the table links its run and its cell's evidence
    for rid in ids:
        assert f"| [{rid}](../runs/run-{rid}.md) |" in en and f"](../runs/run-{rid}-evidence.md#cell-" in en
    for metric in ("decode", "prefill", "ttft", "load"):
        for lang in ("en", "de"):
            assert (trends / "img" / f"trend-nightly-tiny-a-{metric}-{lang}.svg").read_text().startswith("<svg")
    index = (trends / "index.de.md").read_text()
    assert "[tiny-a](trend-nightly-tiny-a.md)" in index and "Gefundene Stufen" in index


def test_no_step_is_said_as_such_and_a_condition_change_is_listed(tmp_path):
    runs = [{"level": 70.0, "build": "b1"}] * 4 + [{"level": 70.0, "build": "b2"}] * 4
    ids = make_db(tmp_path / "c.db", runs)
    _write(tmp_path / "c.db", tmp_path / "p")
    en = (tmp_path / "p" / "site" / "trends" / "trend-nightly-tiny-a.md").read_text()
    assert "No step: where the figures moved" in en
    assert f"| [{ids[4]}](../runs/run-{ids[4]}.md) |" in en and "server build: `b1` → `b2`" in en


def test_foreign_names_are_escaped_and_stale_pages_go(tmp_path):
    hostile = "m|x<script>alert(1)</script>*_[a](b)"
    make_db(tmp_path / "x.db", [{"level": 10.0}] * 3, model=hostile, name="c<img src=x>")
    _write(tmp_path / "x.db", tmp_path / "p")
    trends = tmp_path / "p" / "site" / "trends"
    pages = sorted(trends.glob("trend-*.md"))
    assert len(pages) == 2
    for page in pages:
        text = page.read_text().split("---", 2)[2]  # the body; the title is YAML, HTML-escaped
        assert "<script>" not in text and "<img" not in text and "[a](b)" not in text
    # the store no longer has that campaign: its pages and charts go at the next build
    make_db(tmp_path / "y.db", [{"level": 10.0}] * 3)
    _write(tmp_path / "y.db", tmp_path / "p")
    assert sorted(p.name for p in trends.glob("trend-*.md")) == ["trend-nightly-tiny-a.de.md",
                                                                 "trend-nightly-tiny-a.md"]
    assert all(p.name.startswith("trend-nightly-tiny-a-") for p in (trends / "img").glob("*.svg"))


def test_unchanged_figures_render_nothing_again_and_a_new_run_does(tmp_path):
    make_db(tmp_path / "u.db", [{"level": 10.0}] * 3)
    _write(tmp_path / "u.db", tmp_path / "p")
    trends = tmp_path / "p" / "site" / "trends"
    svg = trends / "img" / "trend-nightly-tiny-a-decode-en.svg"
    svg.write_text("<svg>kept</svg>")
    assert _write(tmp_path / "u.db", tmp_path / "p") == []  # no page, no index, no chart rewritten
    assert svg.read_text() == "<svg>kept</svg>"
    # a changed figure: its page and its charts are made again
    store = open_store(tmp_path / "u.db")
    store.db.execute("update samples set decode_tps = decode_tps * 2 where run_id = 3")
    store.db.conn.commit()
    store.close()
    assert {p.name for p in _write(tmp_path / "u.db", tmp_path / "p")} >= {"trend-nightly-tiny-a.md",
                                                                          "trend-nightly-tiny-a.de.md"}
    assert svg.read_text().startswith("<svg") and "kept" not in svg.read_text()


def test_a_hostile_server_build_is_escaped_in_the_step_and_the_tables(tmp_path):
    bad = "b1|<script>alert(1)</script>[x](javascript:y)"
    runs = [{"level": 100.0, "build": bad}] * 4 + [{"level": 80.0, "build": "b2`"}] * 4
    make_db(tmp_path / "h.db", runs)
    _write(tmp_path / "h.db", tmp_path / "p")
    for name in ("trend-nightly-tiny-a.md", "trend-nightly-tiny-a.de.md", "index.md"):
        text = (tmp_path / "p" / "site" / "trends" / name).read_text()
        assert "fell" in text or "sank" in text
        prose = re.sub(r"(`+).*?\1", "", text)  # code spans are inert by construction (report/mdsafe.py)
        assert "<script>" not in text and not re.search(r"(?<!\\)\]\(javascript:", prose)
        # no table row gained a column from the build's "|": each row has its own table's header's columns
        lines = text.splitlines()
        columns = None
        for i, line in enumerate(lines):
            if line.startswith("|---"):
                columns = lines[i - 1].count(" | ")
            elif line.startswith("| [") and columns is not None:
                assert line.count(" | ") == columns, line
            elif not line.startswith("|"):
                columns = None


def test_a_load_time_step_is_told_of_the_model_in_both_languages(tmp_path):
    runs = [{"level": 50.0, "load": 2.0}] * 5 + [{"level": 50.0, "load": 3.0}] * 5
    ids = make_db(tmp_path / "l.db", runs)
    _write(tmp_path / "l.db", tmp_path / "p")
    en = (tmp_path / "p" / "site" / "trends" / "trend-nightly-tiny-a.md").read_text()
    de = (tmp_path / "p" / "site" / "trends" / "trend-nightly-tiny-a.de.md").read_text()
    assert re.search(r"load time of tiny-a rose (49|50)\.\d\u00a0%", en) and f"[run {ids[5]}](../runs/run-{ids[5]}.md)" in en
    assert "Ladezeit von tiny-a stieg zwischen" in de


def test_a_long_series_tables_the_latest_runs_and_those_that_matter_and_the_csv_has_all(tmp_path, monkeypatch):
    import csv

    from cardproof.report.history import render

    monkeypatch.setattr(render, "TABLE_RUNS", 5)
    runs = ([{"level": 100.0, "build": "b1"}] * 10 + [{"level": 80.0, "build": "b2"}] * 10
            + [{"level": 80.0, "status": "interrupted", "build": "b2"}] + [{"level": 80.0, "build": "b2"}] * 10)
    ids = make_db(tmp_path / "long.db", runs)
    _write(tmp_path / "long.db", tmp_path / "p")
    trends = tmp_path / "p" / "site" / "trends"
    en = (trends / "trend-nightly-tiny-a.md").read_text()
    shown = [rid for rid in ids if f"| [{rid}](../runs/run-{rid}.md) |" in en]
    # the step's two runs (which is also where the build changed), the interrupted run, the latest five
    assert shown == [ids[9], ids[10], ids[20], *ids[-5:]]
    assert "23 older runs with no step, no changed condition and a usable state are left out" in en
    assert "[Every run as CSV](trend-nightly-tiny-a.csv)" in en
    assert "23 ältere Läufe ohne Stufe" in (trends / "trend-nightly-tiny-a.de.md").read_text()
    with (trends / "trend-nightly-tiny-a.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["run"]) for r in rows] == ids and rows[20]["state"] == "interrupted"
    assert float(rows[0]["decode_tps_median"]) > 90 > float(rows[15]["decode_tps_median"])


def test_the_index_keeps_the_lines_of_unchanged_pages_and_they_are_what_a_fresh_build_writes(tmp_path):
    """One new run in one campaign: the index takes the other campaign's line from the last build (a doctored
    line with the right fingerprint shows, so it is really read) and is what a build from nothing writes."""
    import json

    db = tmp_path / "i.db"
    make_db(db, [{"level": 100.0}] * 5 + [{"level": 80.0}] * 5, name="nightly")
    make_db(db, [{"level": 50.0}] * 4, name="weekly", seed=2)
    _write(db, tmp_path / "p")
    trends = tmp_path / "p" / "site" / "trends"
    kept = json.loads((trends / ".trend-index.json").read_text())
    weekly = next(n for n in kept["en"] if "weekly" in n)
    make_db(db, [{"level": 80.0}], name="nightly", seed=3)
    _write(db, tmp_path / "p")
    _write(db, tmp_path / "fresh")
    for lang in ("index.md", "index.de.md"):
        assert (trends / lang).read_text() == (tmp_path / "fresh" / "site" / "trends" / lang).read_text()
    kept = json.loads((trends / ".trend-index.json").read_text())
    kept["en"][weekly]["n_runs"] = 4321
    (trends / ".trend-index.json").write_text(json.dumps(kept))
    make_db(db, [{"level": 80.0}], name="nightly", seed=4)
    _write(db, tmp_path / "p")
    # the doctored count, printed as every count is (with its thousands separator)
    assert "| 4,321 |" in (trends / "index.md").read_text() and "| 4.321 |" not in (trends / "index.de.md").read_text()
