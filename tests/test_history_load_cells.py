"""Load (concurrent streams) and context-depth steps as cells of the history series and trend pages.

Generated data on real SQLite (bench/history_steps_data.py stores rows as daemon/run/load/ does): a step's
true size and place must be known to check that the detection finds it.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from cardproof.report.history import build_series
from cardproof.report.history.render import write_trends
from history_data import make_db

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from history_steps_data import add_steps  # noqa: E402

RUNS = [{"level": 100.0, "build": "b1"}] * 6 + [{"level": 100.0, "build": "b2"}] * 5


def _series(path):
    store = open_store(path, mode="ro")
    try:
        return build_series(store.db)
    finally:
        store.close()


def _step_db(path, seed=11):
    ids = make_db(path, RUNS)
    # 4 streams: per-request decode falls 20 % from the 7th run on; 1 stream and the depth stay put
    add_steps(path, seed=seed,
              level=lambda i, m, axis, v: (50.0 if i < 6 else 40.0) if (axis, v) == ("load", 4) else 60.0)
    return ids


def test_a_known_step_in_a_load_cell_is_found_at_its_place_with_its_size(tmp_path):
    ids = _step_db(tmp_path / "s.db")
    by_cell = {(s["kind"], s["streams"], s["depth_tokens"]): s for s in _series(tmp_path / "s.db")}
    assert set(by_cell) == {("measure", None, None), ("load", 1, None), ("load", 4, None), ("depth", None, 4096)}
    assert by_cell[("load", 4, None)]["metrics"] == ["decode_tps", "aggregate_tps", "ttft_ms", "ttft_p90_ms"]
    assert by_cell[("depth", None, 4096)]["metrics"] == ["decode_tps", "prefill_tps"]
    steps = {st["metric"]: st for st in by_cell[("load", 4, None)]["steps"]}
    assert set(steps) == {"decode_tps", "aggregate_tps"}
    for st in steps.values():
        assert (st["before"]["run_id"], st["after"]["run_id"]) == (ids[5], ids[6])
        assert st["low"] <= -0.2 <= st["high"] or abs(st["change"] + 0.2) < 0.02
        assert st["regression"]
    assert steps["decode_tps"]["low"] <= -0.2 <= steps["decode_tps"]["high"]
    # the aggregate is the step's generated tokens per second of its wall time: one figure per run
    p = by_cell[("load", 4, None)]["points"][0]
    assert len(p["values"]["aggregate_tps"]) == 1 and abs(p["values"]["aggregate_tps"][0] - 200.0) < 1e-6
    # its TTFT p90 is the 90th percentile of the step's stored TTFTs (interpolated), one figure per run
    store = open_store(tmp_path / "s.db", mode="ro")
    try:
        for p in by_cell[("load", 4, None)]["points"]:
            stored = sorted(r[0] for r in store.db.execute(
                "select ttft_ms from samples where cell_id = ? and kind = 'load' and error_kind is null",
                [p["cell_id"]]))
            rank = (len(stored) - 1) * 0.9
            lo = int(rank)
            expected = stored[lo] + (stored[min(lo + 1, len(stored) - 1)] - stored[lo]) * (rank - lo)
            assert len(stored) >= 4 and p["values"]["ttft_p90_ms"] == [expected]
            assert p["spread"]["ttft_p90_ms"].median == expected
    finally:
        store.close()
    assert "ttft_p90_ms" not in by_cell[("measure", None, None)]["points"][0]["values"]
    for key in [("measure", None, None), ("load", 1, None), ("depth", None, 4096)]:
        assert by_cell[key]["steps"] == [], key
    # a load step's samples never reach the prompt-class cell's series, nor its canary
    assert all(max(p["values"]["decode_tps"]) < 110 for p in by_cell[("measure", None, None)]["points"])


def test_noise_in_load_and_depth_cells_gives_no_step(tmp_path):
    for seed in (1, 2, 3, 4):
        path = tmp_path / f"n{seed}.db"
        make_db(path, [{"level": 100.0, "build": f"b{i // 4}"} for i in range(14)], seed=seed)
        add_steps(path, seed=seed, noise=0.08)
        found = [(s["kind"], st["metric"]) for s in _series(path) for st in s["steps"]]
        assert found == [], (seed, found)


def test_refused_depth_and_damaged_step_rows_never_start_a_step_and_do_not_stop_the_build(tmp_path):
    path = tmp_path / "r.db"
    ids = _step_db(path)
    store = open_store(path)
    db = store.db
    with db.conn:
        # the depth of run 7 refused (as daemon/run/load/depth.py stores it: error samples, a reason)
        step = db.execute("select id, cell_id from load_steps where axis = 'depth' and run_id = ?", [ids[6]]).fetchone()
        db.execute("update load_steps set refused_reason = 'exceeds context' where id = ?", [step[0]])
        db.execute("update samples set error_kind = 'refused', decode_tps = null where cell_id = ?", [step[1]])
        # a load step row with no streams: its cell cannot be placed, and is left out
        db.execute("update load_steps set streams = null where axis = 'load' and streams = 1 and run_id = ?", [ids[0]])
    store.close()
    by_cell = {(s["kind"], s["streams"], s["depth_tokens"]): s for s in _series(path)}
    depth = by_cell[("depth", None, 4096)]
    assert [p["state"] for p in depth["points"]].count("refused") == 1 and depth["steps"] == []
    assert ids[0] not in [p["run_id"] for p in by_cell[("load", 1, None)]["points"]]
    store = open_store(path, mode="ro")
    try:
        write_trends(store.db, tmp_path / "proj")
    finally:
        store.close()
    de = (tmp_path / "proj" / "site" / "trends" / "trend-nightly-tiny-a.de.md").read_text()
    assert "abgelehnt" in de


def test_trend_page_shows_load_and_depth_cells_in_both_languages_linked_to_their_steps(tmp_path):
    ids = _step_db(tmp_path / "p.db")
    store = open_store(tmp_path / "p.db", mode="ro")
    try:
        write_trends(store.db, tmp_path / "proj")
        step_id = store.db.execute("select id from load_steps where run_id = ? and axis = 'load' and streams = 4",
                                   [ids[6]]).fetchone()[0]
    finally:
        store.close()
    trends = tmp_path / "proj" / "site" / "trends"
    en = (trends / "trend-nightly-tiny-a.md").read_text()
    de = (trends / "trend-nightly-tiny-a.de.md").read_text()
    assert "## load: 4 streams · short {#cell-load-4-short}" in en
    assert "## depth 4,096 tokens · short {#cell-depth-4096-short}" in en
    assert "## Last: 4 Streams · kurz {#cell-load-4-short}" in de
    assert "## Tiefe 4.096 Token · kurz {#cell-depth-4096-short}" in de
    # each figure of a load cell links to its step's samples on the run's evidence page
    assert f"(../runs/run-{ids[6]}-evidence.md#step-{step_id})" in en
    # the step is told with its cell, in both languages
    assert "decode of tiny-a (load: 4 streams · short) fell" in en
    assert "aggregate tok/s of tiny-a (load: 4 streams · short) fell" in en
    assert "Decode von tiny-a (Last: 4 Streams · kurz) sank" in de
    # the load cell's table has its own columns (aggregate, no load time)
    section = en.split("{#cell-load-4-short}")[1].split("\n## ")[0]
    assert "| aggregate tok/s |" in section and "load time" not in section
    for lang in ("en", "de"):
        svg = (trends / "img" / f"trend-nightly-tiny-a-aggregate-{lang}.svg").read_text()
        assert svg.startswith("<svg") and ("4 streams" in svg or "4 Streams" in svg)
    with (trends / "trend-nightly-tiny-a.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {(r["cell_kind"], r["streams"], r["depth_tokens"]) for r in rows} == {
        ("measure", "", ""), ("load", "1", ""), ("load", "4", ""), ("depth", "", "4096")}


def test_history_command_lists_load_cells_and_their_steps(tmp_path):
    _step_db(tmp_path / "c.db")
    out = CliRunner().invoke(cli, ["history", "--db", str(tmp_path / "c.db"), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    load4 = [s for s in data if s["kind"] == "load" and s["streams"] == 4]
    assert len(load4) == 1 and {st["metric"] for st in load4[0]["steps"]} == {"decode_tps", "aggregate_tps"}
    text = CliRunner().invoke(cli, ["history", "--db", str(tmp_path / "c.db")]).output
    assert "nightly · tiny-a · load 4 streams · short: 11 runs" in text
    assert "decode of tiny-a (load 4 streams, short) fell" in text


def test_an_offered_rate_is_a_cell_of_its_own_with_its_step_found_and_shown(tmp_path):
    """Poisson rate steps (``[load] rates``) as cells: 0.5 requests/s falls 20 % at the build change, 2 stays."""
    path = tmp_path / "r.db"
    ids = make_db(path, RUNS)
    add_steps(path, seed=5, rates=(0.5, 2.0),
              level=lambda i, m, axis, v: (50.0 if i < 6 else 40.0) if (axis, v) == ("rate", 0.5) else 60.0)
    by_cell = {(s["kind"], s["rate_rps"]): s for s in _series(path)}
    assert {k for k in by_cell if k[0] == "rate"} == {("rate", 0.5), ("rate", 2.0)}
    half = by_cell[("rate", 0.5)]
    assert half["metrics"] == ["decode_tps", "aggregate_tps", "ttft_ms", "ttft_p90_ms"] and half["streams"] is None
    steps = {st["metric"]: st for st in half["steps"]}
    assert "decode_tps" in steps and steps["decode_tps"]["regression"]
    assert (steps["decode_tps"]["before"]["run_id"], steps["decode_tps"]["after"]["run_id"]) == (ids[5], ids[6])
    assert steps["decode_tps"]["low"] <= -0.2 <= steps["decode_tps"]["high"]
    assert by_cell[("rate", 2.0)]["steps"] == []
    # the rate steps' requests stay out of every other cell
    assert all(len(p["values"]["decode_tps"]) == 8 for s in by_cell.values() if s["kind"] != "measure"
               for p in s["points"])
    store = open_store(path, mode="ro")
    try:
        write_trends(store.db, tmp_path / "proj")
    finally:
        store.close()
    trends = tmp_path / "proj" / "site" / "trends"
    en = (trends / "trend-nightly-tiny-a.md").read_text()
    de = (trends / "trend-nightly-tiny-a.de.md").read_text()
    assert "## 0.5 requests/s · short {#cell-rate-0p5-short}" in en
    assert "## 2 requests/s · short {#cell-rate-2-short}" in en
    assert "## 0,5 Anfragen/s · kurz {#cell-rate-0p5-short}" in de
    # the rate cells' TTFT p90 (what a service level names) has a chart of its own, in both languages
    for lang, text, axis in (("en", en, "TTFT p90 ms (one figure per run)"),
                             ("de", de, "TTFT p90 ms (ein Wert je Lauf)")):
        assert (trends / "img" / f"trend-nightly-tiny-a-ttft-p90-{lang}.svg").exists()
        assert f"img/trend-nightly-tiny-a-ttft-p90-{lang}.svg" in text and axis in text
    assert "decode of tiny-a (0.5 requests/s · short) fell" in en
    assert "Decode von tiny-a (0,5 Anfragen/s · kurz) sank" in de
    with (trends / "trend-nightly-tiny-a.csv").open() as f:
        rates = {r["rate_rps"] for r in csv.DictReader(f) if r["cell_kind"] == "rate"}
    assert rates == {"0.5", "2.0"}
    out = CliRunner().invoke(cli, ["history", "--db", str(path), "--json"])
    assert out.exit_code == 0, out.output
    assert {s["rate_rps"] for s in json.loads(out.output) if s["kind"] == "rate"} == {0.5, 2.0}
    text = CliRunner().invoke(cli, ["history", "--db", str(path)]).output
    assert "decode of tiny-a (0.5 requests/s, short) fell" in text
