"""The demo's load and depth sweeps: its plan here, its article through ``assert_demo_axes``.

The plan test reads the demo campaign as the demo writes it. The article
checks run on the real demo (real llama-server, real SQLite, mkdocs
--strict) in ``test_report.test_demo_end_to_end``, which calls
``assert_demo_axes`` so the demo runs once per test session.
"""

from __future__ import annotations

import inspect
import re
import sqlite3
from pathlib import Path

from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.campaign.tables.depth import planned_samples
from cardproof.demo import DEMO_CAMPAIGN

DEMO_MODELS = ("tiny-b", "tiny-a")


def _demo_campaign():
    text = DEMO_CAMPAIGN.format(url="http://127.0.0.1:9", log_file="/tmp/none.log", embedding="")
    return parse_campaign(text, "demo-campaign.toml")


def test_demo_plans_a_small_concurrency_and_depth_sweep():
    camp = _demo_campaign()
    assert camp.load.streams == (1, 2, 4) and camp.load.rates is None
    assert camp.depth.tokens == (0, 256, 1024)
    # every depth and its answer fit the context the demo's preset gives each model
    ctx = inspect.signature(llamacpp.write_preset).parameters["ctx_size"].default
    assert all(d + camp.depth.max_tokens <= ctx for d in camp.depth.tokens)
    # small: the demo stays quick (14 stream requests and 6 depth requests per model)
    assert planned_samples(camp.load, camp.depth, len(camp.models)) == 2 * (14 + 6)
    assert camp.load.max_tokens <= camp.max_tokens and camp.depth.max_tokens <= camp.max_tokens


def assert_demo_axes(project: Path, db: Path, run_id: int = 1) -> None:
    """The demo article shows Load and Context depth with a chart per model in both languages."""
    conn = sqlite3.connect(db)
    steps = conn.execute("select axis, count(*) from load_steps where run_id = ? group by axis", [run_id]).fetchall()
    assert dict(steps) == {"load": 3 * len(DEMO_MODELS), "depth": 3 * len(DEMO_MODELS)}
    errors = conn.execute("select count(*) from samples s join load_steps st on st.cell_id = s.cell_id "
                          "where st.run_id = ? and s.error_kind is not null", [run_id]).fetchone()[0]
    assert errors == 0
    site = project / "site" / "runs"
    img = project / "build" / "site" / "runs" / "img"
    for lang, suffix, load, context in (("en", "", "## Load: concurrent streams", "## Context depth"),
                                         ("de", ".de", "## Last: gleichzeitige Streams", "## Kontexttiefe")):
        md = (site / f"run-{run_id}{suffix}.md").read_text()
        assert load in md and context in md, lang
        for section, chart in ((md[md.index(load):md.index(context)], "load"), (md[md.index(context):], "context")):
            for i, model in enumerate(DEMO_MODELS):
                assert f"### {model}" in section
                name = f"run-{run_id}-{chart}-{i}-{lang}.svg"
                assert f"img/{name}" in section, (lang, name)
                svg = (img / name).read_text()
                assert "<svg" in svg and model in svg, (lang, name)
        # each step's row links to its samples on the evidence page
        linked = set(re.findall(rf"\]\(run-{run_id}-evidence\.md#step-(\d+)\)", md))
        assert len(linked) == 6 * len(DEMO_MODELS), (lang, linked)


def test_real_demo_campaign_fits_the_model_and_says_what_it_leaves_out():
    """The SmolLM2 demo: three rungs of one base model, F16 pinned, every prompt and depth inside the
    8,192-token training context, reasoning off (the model declares no thinking mode), and rules and
    expectations that the run can confirm or refute."""
    from cardproof.daemon.server.realmodel import LADDER
    from cardproof.demo import REAL_CAMPAIGN, REAL_CTX

    text = REAL_CAMPAIGN.format(url="http://127.0.0.1:9", log_file="/tmp/none.log", embedding="")
    camp = parse_campaign(text, "demo-campaign.toml")
    assert [m.name for m in camp.models] == list(LADDER)
    assert [m.name for m in camp.models if m.pinned] == ["smollm2-f16"]
    assert camp.reasoning == (False,) and "no thinking mode" in text
    assert REAL_CTX == 8192
    assert all(n + camp.max_tokens <= REAL_CTX for n in camp.prompt_tokens.values())
    assert all(d + camp.depth.max_tokens + 64 <= REAL_CTX for d in camp.depth.tokens)
    assert set(camp.rules) == {"candidate"} and len(camp.expectations) >= 2
