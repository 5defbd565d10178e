"""Canaries never evict the pinned model, whatever the plan looks like (real llama-server, router mode)."""

from __future__ import annotations

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text, unload_all


def test_a_campaign_of_the_pinned_model_alone_runs_its_canaries_without_evicting_it(llama_server, tmp_path):
    """Two cells of the pin and nothing else: the canaries come after them, on the pin, with no eviction."""
    unload_all(llama_server.url)
    text = campaign_text(llama_server.url, models=("tiny-a",), reasoning=(False, True), reps=1, reps_r=1,
                         pinned="tiny-a").replace('name = "test"', 'name = "test"\ncanaries = true')
    store = open_store(tmp_path / "pin.db")
    lines: list[str] = []
    outcome = run_campaign(store, parse_campaign(text, "pin.toml"), echo=lines.append)
    assert outcome.exit_code == 0, lines
    canary = next(store.db.query("select result, reason from canaries where gate = 'load_time'"))
    assert canary["result"] == "not_run"
    assert "tiny-a is the pinned model and is never unloaded by cardproof" in canary["reason"]
    # the pin was loaded once, for its first cell, and never again: nothing unloaded it
    loads = list(store.db.query("select trigger, status from loads where run_id = ?", [outcome.run_id]))
    assert loads == [{"trigger": "explicit", "status": "loaded"}]
    # every measured cell came before the first canary
    order = [ln.split(":")[0].split(" ")[0] for ln in lines if ln.startswith(("[", "canary"))]
    assert order.index("canary") > max(i for i, x in enumerate(order) if x.startswith("["))
