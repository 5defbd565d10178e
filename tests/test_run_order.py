"""The order a run measures its models in, and the article's statement of it.

Real parts: router-mode llama-servers with tiny models (one keeping two
models loaded, the session's keeping one), real SQLite, the report build.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.campaign.order import interleave
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from conftest import campaign_text, start_router

REPS = 3


def _run(url: str, db) -> tuple[int, list[str]]:
    store = open_store(db)
    lines: list[str] = []
    text = campaign_text(url, models=("tiny-b", "tiny-a"), reps=REPS, max_tokens=4)
    outcome = run_campaign(store, parse_campaign(text, "o.toml"), echo=lines.append)
    assert outcome.exit_code == 0, lines
    store.close()
    return outcome.run_id, lines


def _measured_models(db, run_id: int) -> list[str]:
    store = open_store(db)
    try:
        return [r["name"] for r in store.db.query(
            """select models.name from samples join cells on cells.id = samples.cell_id
               join models on models.id = cells.model_id
               where samples.run_id = ? and samples.kind = 'measure' order by samples.id""", [run_id])]
    finally:
        store.close()


def _articles(db, project, run_id: int) -> tuple[str, str]:
    build(db, project, run_mkdocs=False)
    runs = project / "site" / "runs"
    return (runs / f"run-{run_id}.md").read_text(), (runs / f"run-{run_id}.de.md").read_text()


def _section(article: str, heading: str) -> str:
    start = article.index(heading)
    return article[start:article.index("\n## ", start + 1)]


@pytest.fixture(scope="module")
def interleaved(tiny_models, tmp_path_factory):
    """A router that keeps two models loaded: the runner interleaves their repetitions."""
    server = start_router(tiny_models, tmp_path_factory.mktemp("two-models"), models_max=2)
    try:
        db = tmp_path_factory.mktemp("interleaved") / "i.db"
        run_id, lines = _run(server.url, db)
    finally:
        server.stop()
    return db, run_id, lines


def test_repetitions_go_round_robin_where_the_router_keeps_every_model(interleaved):
    db, run_id, lines = interleaved
    assert _measured_models(db, run_id) == ["tiny-b", "tiny-a"] * REPS
    assert any(ln.startswith("order: interleaved across the models: the router keeps all 2 models") for ln in lines)
    store = open_store(db)
    loads = list(store.db.query("select models.name, loads.trigger from loads join models on models.id = model_id "
                                "where run_id = ? order by loads.id", [run_id]))
    store.close()
    # each model loaded once, before the cells; none loaded again inside a measured request
    assert [(ld["name"], ld["trigger"]) for ld in loads] == [("tiny-b", "explicit"), ("tiny-a", "explicit")]


def test_the_article_states_the_interleaved_order_and_why(interleaved, tmp_path):
    db, run_id, _ = interleaved
    en, de = _articles(db, tmp_path / "p", run_id)
    section = _section(en, "## Measurement order")
    assert "measured interleaved across the models: repetition 1 of each model in turn (tiny-b, tiny-a)" in section
    assert "the router keeps all 2 models measured loaded at once (up to 2: max_instances in its /props)" in section
    # the blocks that still run model by model, each with when it ran
    assert "| tiny-b | main cells |" in section and "| tiny-a | main cells |" in section
    section_de = _section(de, "## Messreihenfolge")
    assert "über die Modelle verschränkt gemessen" in section_de
    assert "weil der Router alle 2 gemessenen Modelle gleichzeitig geladen hält" in section_de


def test_a_router_keeping_one_model_measures_in_blocks_and_says_why(llama_server, tmp_path):
    db = tmp_path / "b.db"
    run_id, lines = _run(llama_server.url, db)
    assert _measured_models(db, run_id) == ["tiny-b"] * REPS + ["tiny-a"] * REPS
    assert any(ln.startswith("order: one model after the other: the router keeps at most 1 of the 2 models")
               for ln in lines)
    en, de = _articles(db, tmp_path / "p", run_id)
    section = _section(en, "## Measurement order")
    assert "measured in blocks, one model after the other in a fixed order (tiny-b, tiny-a)" in section
    assert ("They were not interleaved because the router keeps at most 1 of the 2 models measured loaded at once "
            "(max_instances in its /props): interleaving would load a model again before every sample.") in section
    assert "cannot be told from a difference between moments" in section
    assert "in Blöcken gemessen" in _section(de, "## Messreihenfolge")


@pytest.mark.parametrize("kind, props, models, expected", [
    ("llama-server", {"role": "router", "max_instances": 3}, 3, True),
    ("llama-server", {"role": "router", "max_instances": 2}, 3, False),
    ("llama-server", {"role": "router"}, 2, False),
    ("llama-server", {"role": "router", "max_instances": True}, 2, False),  # a bool is no count
    ("llama-server", {"model_path": "/m.gguf"}, 2, False),  # a single server
    ("ollama", {}, 2, False),
    ("llama-server", {"role": "router", "max_instances": 4}, 1, False),  # one model: nothing to interleave
])
def test_interleaving_only_where_the_server_says_it_keeps_every_model(kind, props, models, expected):
    allowed, why = interleave(kind, props, models)
    assert allowed is expected and why.english()
