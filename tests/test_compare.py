"""Comparisons across runs, from two real runs of the same campaign."""

from __future__ import annotations

import json
import statistics

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.compare import compare_runs
from cardproof.report.gates import excluded_samples
from conftest import campaign_text

EXTRA = "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"


@pytest.fixture(scope="module")
def two_runs(llama_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("cmp") / "c.db"
    store = open_store(db)
    first = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short",), reps=3, max_tokens=8)
    second = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short", "medium"), reps=3,
                           max_tokens=8)
    a = run_campaign(store, parse_campaign(first + EXTRA, "c.toml"), echo=lambda s: None).run_id
    b = run_campaign(store, parse_campaign(second + EXTRA, "c.toml"), echo=lambda s: None).run_id
    return store, a, b


def test_deviation_per_cell_equals_the_stored_medians(two_runs):
    store, a, b = two_runs
    cmp = compare_runs(store.db, a, b)
    assert len(cmp["rows"]) == 2  # short cells of both models
    # a sample a gate excluded (a busy host, say) is in neither figure: the comparison reads what the article does
    excluded = {run_id: excluded_samples(store.db, run_id) for run_id in (a, b)}
    for r in cmp["rows"]:
        vals = {}
        for run_id in (a, b):
            vals[run_id] = statistics.median(
                x["decode_tps"] for x in store.db.query(
                    "select samples.id, decode_tps from samples join cells on cells.id = cell_id "
                    "join models on models.id = model_id "
                    "where samples.run_id = ? and models.name = ? and cells.prompt_class = 'short' "
                    "and samples.kind = 'measure'", [run_id, r["model"]]) if x["id"] not in excluded[run_id])
        assert r["a"] == pytest.approx(vals[a]) and r["b"] == pytest.approx(vals[b])
        assert r["deviation"] == pytest.approx(vals[b] / vals[a] - 1)
    assert {w["prompt_class"] for w in cmp["only_b"]} == {"medium"} and cmp["only_a"] == []
    # the campaigns differ in their prompt classes, named as the setting, never as the file's hash
    assert ("setting:campaign.prompt_classes", '["short"]', '["short", "medium"]') in [d for _, d in cmp["differences"]]
    assert not any(d.name == "campaign file" for _, d in cmp["differences"] + cmp["aside"])


def test_compare_cli_and_articles(two_runs, tmp_path):
    store, a, b = two_runs
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--db", str(store.path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["run_a"] == a and len(data["rows"]) == 2 and len(data["only_b"]) == 2
    bad = CliRunner().invoke(cli, ["compare", str(a), "77", "--db", str(store.path)])
    assert bad.exit_code == 1 and "no run 77" in bad.output
    build(store.path, tmp_path / "p")
    art = tmp_path / "p" / "site" / "compare" / f"run-{b}-vs-{a}.md"
    assert art.exists() and (tmp_path / "p" / "site" / "compare" / f"run-{b}-vs-{a}.de.md").exists()
    text = art.read_text()
    assert "directly comparable cells" in text and "Cells in only one run" in text
    run_b = (tmp_path / "p" / "site" / "runs" / f"run-{b}.md").read_text()
    assert f"../compare/run-{b}-vs-{a}.md" in run_b
    built = tmp_path / "p" / "build" / "site" / "compare"
    html = next(p for p in (built / f"run-{b}-vs-{a}" / "index.html", built / f"run-{b}-vs-{a}.html")
                if p.exists()).read_text()  # with or without directory URLs
    assert "<svg" in html or ".svg" in html
