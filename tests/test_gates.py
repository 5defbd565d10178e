"""Gates: each one fires and stays quiet on real server responses; canaries prove them."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.gates import GATES, Gate, GateConfig, GateOutcome, SampleContext, default_config, english, evaluate
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from conftest import campaign_text


@pytest.fixture(scope="module")
def canary_run(llama_server, tmp_path_factory):
    """A real run with canaries: tiny-b measured, tiny-a pinned and measured last."""
    db = tmp_path_factory.mktemp("gates") / "g.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short",), reps=3,
                         max_tokens=8, pinned="tiny-a").replace('name = "test"', 'name = "test"\ncanaries = true')
    lines = []
    outcome = run_campaign(store, parse_campaign(text, "g.toml"), echo=lines.append)
    assert outcome.exit_code == 0, lines
    return store, outcome.run_id, lines


def _results(store, run_id, kind):
    out = {}
    for r in store.db.query(
        "select gate_results.*, samples.kind from gate_results join samples on samples.id = sample_id "
        "where samples.run_id = ? and samples.kind = ?", [run_id, kind]):
        out.setdefault(r["sample_id"], {})[r["gate"]] = r
    return out


def test_every_canary_fires_against_the_real_server(canary_run):
    store, run_id, lines = canary_run
    canaries = {c["gate"]: c for c in store.db.query("select * from canaries where run_id = ?", [run_id])}
    assert set(canaries) == set(GATES)
    for gate, c in canaries.items():
        expected = "recorded" if gate == "not_on_card" else "fired"
        assert c["result"] == expected, (gate, c["reason"])
    # the one recorded canary says where its line comes from
    assert "github.com/ggml-org/llama.cpp/issues/24183" in canaries["not_on_card"]["reason"]
    # the pinned model was measured after the canaries, so no canary evicted it mid-run
    order = [ln.split(":")[0] for ln in lines if ln.startswith(("canary", "load tiny-a"))]
    assert order[-1] == "load tiny-a"


def test_canary_samples_never_reach_medians(canary_run, tmp_path):
    """The median and n of tiny-b's cell are those of its measured samples alone, never of its canaries."""
    import sqlite3

    from cardproof.report.gates import excluded_samples

    store, run_id, _ = canary_run
    n_canary = store.db.execute("select count(*) from samples where run_id = ? and kind = 'canary'", [run_id]).fetchone()[0]
    assert n_canary >= 8
    # A copy whose frozen campaign only counts the two gates that fire on every sample of tiny models
    # on a machine without a GPU: the measured samples stay in the medians wherever this runs, so the
    # median below is always checked (not only on a machine where no excluding gate fired).
    copy = tmp_path / "copy.db"
    with sqlite3.connect(copy) as dst:  # the backup API also takes what is still in the WAL
        store.db.conn.backup(dst)
    from cardproof.daemon.campaign.frozen import normalised_text

    with sqlite3.connect(copy) as conn:  # the text and its parsed form, as if the campaign had been frozen so
        conn.execute("update campaigns set toml_text = toml_text || ? where id = (select campaign_id from runs "
                     "where id = ?)", ["\n[gates.not_on_card]\nexclude = false\n[gates.length_limit]\nexclude = false\n",
                                       run_id])
        cid, text = conn.execute("select c.id, c.toml_text from campaigns c join runs r on r.campaign_id = c.id "
                                 "where r.id = ?", [run_id]).fetchone()
        conn.execute("update campaigns set campaign_json = ? where id = ?", [normalised_text(text), cid])
    other = open_store(copy)
    build(copy, tmp_path / "p", run_mkdocs=False)
    article = (tmp_path / "p" / "site" / "runs" / f"run-{run_id}.md").read_text()
    table = article[article.index("## The numbers"):article.index("## Gates")]
    row = next(line for line in table.splitlines() if line.startswith("| tiny-b"))
    excluded = excluded_samples(other.db, run_id)
    measured = list(other.db.query(
        "select samples.id, decode_tps from samples join cells on cells.id = cell_id join models on models.id = model_id "
        "where samples.run_id = ? and samples.kind = 'measure' and models.name = 'tiny-b'", [run_id]))
    assert len(measured) == 3
    kept = [r["decode_tps"] for r in measured if r["id"] not in excluded]
    assert len(kept) == 3, excluded  # no other gate fires on a plain measured sample of a tiny model
    canaries_of_b = other.db.execute(
        "select count(*) from samples join cells on cells.id = cell_id join models on models.id = model_id "
        "where samples.run_id = ? and samples.kind = 'canary' and models.name = 'tiny-b'", [run_id]).fetchone()[0]
    assert canaries_of_b >= 8  # tiny-b is the model the canaries ran on: had they counted, n would show it
    assert f"{statistics.median(kept):,.1f}" in row and re.search(r"\bn=3\b", row), row
    other.close()


def test_quiet_gates_stay_quiet_on_real_measurements(canary_run):
    store, run_id, _ = canary_run
    measured = _results(store, run_id, "measure")
    assert len(measured) == 6
    for sample_id, gates in measured.items():
        assert set(gates) == set(GATES)  # a result row per gate per sample
        for quiet in ("load_time", "prompt_cache_hit", "foreign_load", "embedding_down", "counter_sanity"):
            assert gates[quiet]["fired"] == 0, (quiet, gates[quiet]["observed_text"])
        # no GPU on this machine: not_on_card fires, and says why
        assert gates["not_on_card"]["fired"] == 1
        assert "no GPU" in gates["not_on_card"]["observed_text"]


def test_each_gate_also_seen_not_firing_on_a_real_canary_response(canary_run):
    """The empty-answer canary stopped on end-of-sequence: length_limit must not fire on it."""
    store, run_id, _ = canary_run
    c = next(store.db.query("select sample_id from canaries where run_id = ? and gate = 'empty_answer'", [run_id]))
    gates = {g["gate"]: g for g in store.db.query("select * from gate_results where sample_id = ?", [c["sample_id"]])}
    assert gates["empty_answer"]["fired"] == 1
    assert gates["length_limit"]["fired"] == 0
    assert gates["counter_sanity"]["fired"] == 1  # one token: no decode interval either


def test_gates_cli_json(canary_run):
    store, run_id, _ = canary_run
    result = CliRunner().invoke(cli, ["gates", "--db", str(store.path), "--run", str(run_id), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {d["gate"] for d in data} == set(GATES)
    for d in data:
        assert d["canary"] in ("fired", "not_fired", "recorded", "not_run")
        assert isinstance(d["fired_samples"], int)
    by = {d["gate"]: d for d in data}
    assert by["not_on_card"]["fired_samples"] == 6 and by["load_time"]["fired_samples"] == 0
    result = CliRunner().invoke(cli, ["gates", "--db", str(store.path), "--run", "999"])
    assert result.exit_code == 1 and "no run 999" in result.output


def test_without_canaries_quiet_gates_are_flagged_unproven(llama_server, tmp_path):
    store = open_store(tmp_path / "u.db")
    outcome = run_campaign(store, parse_campaign(campaign_text(llama_server.url, reps=1), "u.toml"), echo=lambda s: None)
    result = CliRunner().invoke(cli, ["gates", "--db", str(store.path), "--json"])
    by = {d["gate"]: d for d in json.loads(result.output)}
    assert outcome.exit_code == 0
    assert by["load_time"]["canary"] == "not_run" and by["load_time"]["unproven"] is True
    assert by["not_on_card"]["unproven"] is False  # it fired during measurement
    build(store.path, tmp_path / "p", run_mkdocs=False)
    article = (tmp_path / "p" / "site" / "runs" / f"run-{outcome.run_id}.md").read_text()
    # the rewritten gates section lists each quiet gate once, its canary state in bold and, if unproven, says so
    line = next(x for x in article.splitlines() if x.startswith("- `load_time` — "))
    assert "**not_run**" in line and "**unproven: this gate was never seen to fire" in line
    assert not any(x.startswith("- `not_on_card` — ") for x in article.splitlines())  # it fired: not listed as quiet


def test_a_gate_that_raises_is_recorded_as_its_exception(monkeypatch):
    def broken(ctx, threshold):
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(GATES, "broken_gate", Gate("broken_gate", "raises", broken))
    ctx = SampleContext(sample={"stop_reason": "length", "generated_tokens": 8, "cached_tokens": 0}, response={}, max_tokens=8)
    rows = {r["gate"]: r for r in evaluate(ctx, default_config())}
    assert rows["broken_gate"]["fired"] is None
    assert rows["broken_gate"]["error_text"] == "ZeroDivisionError: boom"
    assert rows["length_limit"]["fired"] == 1


def test_not_on_card_on_recorded_offload_facts():
    """Recorded lines: partial offload (llama.cpp issue #24183) fires, full offload does not."""
    gate = GATES["not_on_card"]
    partial = SampleContext(sample={}, response={}, max_tokens=0, facts={"offloaded_layers": 65, "total_layers": 66},
                            gpu_available=True)
    full = SampleContext(sample={}, response={}, max_tokens=0, facts={"offloaded_layers": 66, "total_layers": 66},
                         gpu_available=True)
    assert gate.check(partial, 0).fired is True
    assert gate.check(full, 0).fired is False
    share = SampleContext(sample={}, response={}, max_tokens=0, gpu_available=True, gpu_share=0.87)
    out = gate.check(share, 0)
    assert (out.fired, out.observed, english(out.observed_text)) == (True, 0.87, "runtime reports 87% on the GPU")


def test_exception_samples_get_no_gate_results(fresh_server, tmp_path):
    store = open_store(tmp_path / "e.db")
    camp = parse_campaign(campaign_text(fresh_server.url, models=("tiny-b",), reps=3), "e.toml")
    outcome = run_campaign(store, camp, echo=lambda line: fresh_server.kill() if line.startswith("[1/3]") else None)
    assert (outcome.measured, outcome.failed) == (1, 2)
    rows = list(store.db.query(
        "select samples.id, samples.error_kind, count(gate_results.id) as n from samples "
        "left join gate_results on gate_results.sample_id = samples.id group by samples.id order by samples.id"))
    assert [(r["error_kind"], r["n"]) for r in rows] == [(None, len(GATES)), ("connection", 0), ("connection", 0)]
    assert GateConfig(1.0, True) == default_config()["load_time"]


def test_foreign_gpu_process_during_a_cell_fires_foreign_load(canary_run, tmp_path):
    """Recorded NVML reading (same rows the sampler writes): a process that is no
    load of this run held memory on the card during a cell."""
    import sqlite3

    from cardproof.daemon.run.judge import judge_run
    from cardproof.report.gates import run_gate_config

    store, run_id, _ = canary_run
    copy = tmp_path / "copy.db"
    with sqlite3.connect(copy) as dst:  # the backup API also takes what is still in the WAL
        store.db.conn.backup(dst)
    other = open_store(copy)
    cell = next(other.db.query(
        "select cells.id, min(cell_checks.at) as t0, max(cell_checks.at) as t1 from cells join cell_checks on "
        "cell_checks.cell_id = cells.id where cells.run_id = ? and cells.kind = 'measure' group by cells.id "
        "order by cells.id limit 1", [run_id]))
    other.insert("memory_samples", {"run_id": run_id, "ts": cell["t0"], "scope": "process", "device_index": 0,
                                    "pid": 424242, "process_name": "python3", "used_mib": 2048.0,
                                    "source": "recorded"})
    judge_run(other, run_id, run_gate_config(other.db, run_id))
    fired = {r["sample_id"]: r for r in other.db.query(
        "select sample_id, fired, observed_text from gate_results join samples on samples.id = sample_id "
        "where gate = 'foreign_load' and samples.cell_id = ?", [cell["id"]])}
    assert fired and all(r["fired"] == 1 for r in fired.values())
    assert all("pid 424242 (python3)" in r["observed_text"] for r in fired.values())
