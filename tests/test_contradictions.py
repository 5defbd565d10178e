"""Contradictions (detected and authored) and author's notes in the article."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report import queries
from cardproof.report.contradictions import DETECTORS
from conftest import campaign_text

GOOD = """
[[contradiction]]
title = { en = "Probe says broken, samples show <b>reasoning</b>", de = "Probe sagt kaputt" }
[contradiction.a]
text = { en = "The probe said FAIL_BROKEN.", de = "Die Probe sagte FAIL_BROKEN." }
evidence = ["sample-{s1}"]
[contradiction.b]
text = { en = "Samples carry text.", de = "Messungen tragen Text." }
evidence = ["cell-{c1}"]

[[contradiction]]
title = { en = "Settled one", de = "Erledigt" }
status = "resolved"
resolution = { en = "It was another load.", de = "Es war ein anderer Ladevorgang." }
[contradiction.a]
text = { en = "x", de = "x" }
evidence = ["sample-{s1}"]
[contradiction.b]
text = { en = "y", de = "y" }
evidence = ["sample-{s2}"]
"""


@pytest.fixture(scope="module")
def run_db(llama_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("con") / "c.db"
    store = open_store(db)
    outcome = run_campaign(store, parse_campaign(campaign_text(llama_server.url, reps=2), "c.toml"),
                           echo=lambda s: None)
    ids = [r["id"] for r in store.db.query("select id from samples order by id")]
    cell = store.db.execute("select min(id) from cells").fetchone()[0]
    store.close()
    return db, outcome.run_id, ids, cell


def test_authored_contradictions_and_notes_render_in_both_languages(run_db, tmp_path):
    db, run_id, ids, cell = run_db
    project = tmp_path / "p"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / f"run-{run_id}.contradictions.toml").write_text(
        GOOD.replace("{s1}", str(ids[0])).replace("{s2}", str(ids[1])).replace("{c1}", str(cell)))
    (project / "notes" / f"run-{run_id}.intro.en.md").write_text("Written by hand before the table.")
    (project / "notes" / f"run-{run_id}.intro.de.md").write_text("Von Hand vor der Tabelle geschrieben.")
    (project / "notes" / f"run-{run_id}.outro.en.md").write_text("A closing remark.")
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 0, result.output
    en = (project / "site" / "runs" / f"run-{run_id}.md").read_text()
    de = (project / "site" / "runs" / f"run-{run_id}.de.md").read_text()
    assert en.index("Written by hand before the table.") < en.index("## Headline")
    assert en.index("A closing remark.") < en.index("## Evidence")
    assert "Von Hand vor der Tabelle geschrieben." in de
    opened = en[en.index("## Open contradictions"):en.index("### Resolved contradictions")]
    assert "&lt;b&gt;reasoning&lt;/b&gt;" in opened and f"-evidence.md#sample-{ids[0]})" in opened and f"-evidence.md#cell-{cell})" in opened
    resolved = en[en.index("### Resolved contradictions"):en.index("## Comparison with earlier runs")]
    assert "Settled one" in resolved and "It was another load." in resolved
    assert "Settled one" not in opened
    assert "Offene Widersprüche" in de and "Es war ein anderer Ladevorgang." in de


def test_bad_authored_file_names_file_and_key(run_db, tmp_path):
    db, run_id, ids, cell = run_db
    project = tmp_path / "p"
    (project / "notes").mkdir(parents=True)
    bad = project / "notes" / f"run-{run_id}.contradictions.toml"
    bad.write_text('[[contradiction]]\ntitle = { en = "only English" }\n')
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 1
    assert f"{bad}: key 'contradiction[0].title'" in result.output


def test_evidence_link_to_a_missing_anchor_fails_the_strict_build(run_db, tmp_path):
    db, run_id, ids, cell = run_db
    project = tmp_path / "p"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / f"run-{run_id}.contradictions.toml").write_text(
        GOOD.replace("{s1}", "999999").replace("{s2}", str(ids[1])).replace("{c1}", str(cell)))
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 1
    assert "sample-999999" in result.output


def test_counters_vs_clock_detector(run_db, tmp_path):
    db, run_id, ids, cell = run_db
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    store = open_store(copy)
    assert DETECTORS["counters_vs_clock"](store.db, queries.run_view(store.db, run_id)) == []
    view = queries.run_view(store.db, run_id)
    sid = next(s["id"] for s in view["samples"] if not s["error_kind"] and s["prompt_ms"] is not None)
    # Counters a few ms over the wall time are clock granularity, not a contradiction; the tiny
    # model answers in a few ms, so the counters are set here rather than taken as measured
    # (CI's faster machine once measured a whole sample inside the slack).
    store.db.execute("update samples set prompt_ms = 30, predicted_ms = 70, wall_ms = 97 where id = ?", [sid])
    store.db.conn.commit()
    assert DETECTORS["counters_vs_clock"](store.db, queries.run_view(store.db, run_id)) == []
    # a stored wall time far shorter than the server's own counters: the two clocks disagree
    store.db.execute("update samples set wall_ms = 40 where id = ?", [sid])
    store.db.conn.commit()
    (c,) = DETECTORS["counters_vs_clock"](store.db, queries.run_view(store.db, run_id))
    assert c.status == "open" and f"sample-{sid}" in c.a.evidence
    assert "100.0 ms" in c.a.text["en"] and "40.0 ms" in c.b.text["en"]


def test_card_below_self_report_is_a_contradiction():
    """Recorded-reading shape of the memory view: the card holding less than the runtime claims."""
    from cardproof.report.contradictions import DETECTORS

    detect = DETECTORS["card_vs_selfreport"]
    view = {"memory": {"loads": [{"load_id": 7, "model": "m", "card_mib": 20000.0, "selfreport_mib": 25107.0,
                                  "selfreport_source": "ollama /api/ps"}]}}
    (c,) = detect(None, view)
    assert "less memory" in c.title["en"] and c.a.evidence == ("memory-load-7",)
    view["memory"]["loads"][0]["card_mib"] = 33167.0  # the usual direction: itemised, not contradictory
    assert detect(None, view) == []
    assert detect(None, {"memory": {"status": "not_measured", "loads": []}}) == []


@pytest.fixture(scope="module")
def probed_db(llama_server, tmp_path_factory):
    """A real run of tiny-b with its probes, whose answers carry the server's timings."""
    db = tmp_path_factory.mktemp("probed") / "p.db"
    store = open_store(db)
    text = (campaign_text(llama_server.url, models=("tiny-b",), reps=3, max_tokens=16)
            + '\n[probes]\nrun = ["thinking", "reasoning"]\nrepeat = 1\nmax_tokens = 16\n'
            + "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n")
    outcome = run_campaign(store, parse_campaign(text, "p.toml"), echo=lambda s: None)
    store.close()
    return db, outcome.run_id


def _probe_timings(store, run_id: int, rate: float | None = None, prompt_n: int | None = None) -> list[int]:
    """The probe rows whose answers carry timings; ``rate`` (plus a step per answer) becomes their decode rate,
    ``prompt_n`` their prompt's size."""
    import json

    ids = []
    for r in list(store.db.query("select id, exchange_json from probe_results where run_id = ?", [run_id])):
        exchange = json.loads(r["exchange_json"])
        timed = [resp for resp in exchange.get("responses") or [] if isinstance(resp, dict) and resp.get("timings")]
        for resp in timed:
            if rate is not None:
                resp["timings"]["predicted_per_second"] = rate + len(ids)
            if prompt_n is not None:
                resp["timings"]["prompt_n"] = prompt_n
        if timed:
            ids.append(r["id"])
            store.db.execute("update probe_results set exchange_json = ? where id = ?", [json.dumps(exchange), r["id"]])
    store.db.conn.commit()
    return ids


def test_probe_requests_that_disagree_with_the_cells_are_a_contradiction(probed_db, tmp_path):
    """The probes' own counters against the main cell, on a copy whose probe answers say fifty times the
    cell's fastest decode rate (as measured, a machine's noise decides whether the blocks agree). The
    reasoning probe asks with reasoning off, as the cell does; the thinking probe asks with it on, and
    is compared with no cell of this run."""
    db, run_id = probed_db
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    store = open_store(copy)
    view = queries.run_view(store.db, run_id)
    fastest = max(s["decode_tps"] for s in view["samples"] if s["decode_tps"])
    probes = _probe_timings(store, run_id, rate=50 * fastest)
    assert len(probes) >= 3  # the thinking probe's answer and the reasoning probe's carry the server's counters
    (c,) = DETECTORS["repeated_figures"](store.db, queries.run_view(store.db, run_id))
    assert c.a.text["en"].startswith("Main cells: ") and c.b.text["en"].startswith("Probe requests: ")
    assert "main cells against probe requests" in c.title["en"]
    assert "Anfragen der Prüfungen" in c.b.text["de"]
    thinking = store.db.execute("select id from probe_results where run_id = ? and probe = 'thinking'",
                                [run_id]).fetchone()[0]
    assert c.b.evidence and set(c.b.evidence) <= {f"probe-{i}" for i in probes} - {f"probe-{thinking}"}
    # a probe prompt far from every measured class (here forty times the short one's) is no such figure
    _probe_timings(store, run_id, prompt_n=4000)
    assert DETECTORS["repeated_figures"](store.db, queries.run_view(store.db, run_id)) == []
    store.close()


def test_blocks_disagree_only_where_their_ranges_part_beyond_chance():
    """Ranges apart is not enough with few figures: two against two from one source part one time in three.
    Four against four part one time in 35, and then a wide scatter on one side (a stalled moment) does not
    hide it, as it would from Welch's t-test."""
    from cardproof.report.contradictions.repeated_figures import _Block, _disagreeing

    def block(kind, values):
        b = _Block(kind, f"{kind}-1")
        for i, v in enumerate(values):
            b.add(v, f"sample-{i}", f"2026-01-01T00:00:0{i}+00:00" if kind == "cells" else f"2026-01-01T00:01:0{i}")
        return b

    assert _disagreeing([block("cells", [10, 11]), block("load", [20, 21])]) == []
    slow, quiet = block("cells", [40, 5, 61, 30]), block("load", [538, 1897, 532, 4111])
    ((a, b),) = _disagreeing([quiet, slow])
    assert (a.kind, b.kind) == ("cells", "load")  # in the order they were measured
    assert _disagreeing([slow, block("load", [538, 1897, 45, 4111])]) == []  # one figure inside: no contradiction
