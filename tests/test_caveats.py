"""Caveat rules on the data of real runs (tiny-a has a draft model and a fuller
vocabulary than tiny-b, so real prompt counts differ and speculation runs)."""

from __future__ import annotations

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report import queries
from cardproof.report.build import render_caveat
from cardproof.report.caveats import RULES, caveats_for
from cardproof.report.gates import gate_summary
from cardproof.report.i18n import Lang
from conftest import campaign_text


def _view(store, run_id):
    view = queries.run_view(store.db, run_id)
    view["gates"] = gate_summary(store.db, run_id)
    return view


@pytest.fixture(scope="module")
def two_model_view(llama_server, tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("cav") / "c.db")
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short", "medium"),
                         reasoning=(False, True), reps=2, reps_r=1, max_tokens=16)
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    outcome = run_campaign(store, parse_campaign(text, "c.toml"), echo=lambda s: None)
    return _view(store, outcome.run_id)


def _by_rule(view):
    out = {}
    for c in caveats_for(view):
        out.setdefault(c.rule, []).append(c)
    return out


def test_prompt_token_caveat_names_the_longer_prompt(two_model_view):
    cav = _by_rule(two_model_view)["prompt_tokens"]
    medium = next(c for c in cav if c.params["cls"] == "medium")
    assert medium.params["hi_model"] == "tiny-b" and medium.params["lo_model"] == "tiny-a"
    assert medium.params["excess"][1] > 0.10
    en = render_caveat(medium, Lang("en"))
    de = render_caveat(medium, Lang("de"))
    assert "more prompt tokens" in en["text"] and "mehr Prompt-Token" in de["text"]
    assert "mittel" in de["text"]


def test_speculative_caveat_only_for_the_drafted_model(two_model_view):
    cav = _by_rule(two_model_view)["speculative"]
    assert [c.params["model"] for c in cav] == ["tiny-a"]
    assert cav[0].params["gen"][1] > 0


def test_reasoning_switch_caveat_when_no_reasoning_text(two_model_view):
    cav = _by_rule(two_model_view)["reasoning_switch"]
    assert {c.params["model"] for c in cav} == {"tiny-a", "tiny-b"}


def test_unproven_gate_caveat_lists_quiet_gates_without_canary(two_model_view):
    (cav,) = _by_rule(two_model_view)["unproven_gates"]
    assert "load_time" in cav.params["gates"] and "not_on_card" not in cav.params["gates"]


def test_rules_stay_silent_when_the_data_does_not_call_for_them(two_model_view):
    one = dict(two_model_view)
    one["models"] = [m for m in two_model_view["models"] if m["name"] == "tiny-b"]
    one["cells"] = [c for c in two_model_view["cells"] if c["model"] == "tiny-b"]
    one["gates"] = [dict(g, unproven=False) for g in two_model_view["gates"]]
    assert RULES["prompt_tokens"](one) == []  # a single model cannot differ from itself
    assert RULES["speculative"](one) == []  # tiny-b has no draft model
    assert RULES["unproven_gates"](one) == []
    assert RULES["exception_rate"](one) == []


def test_exception_rate_caveat_on_a_reproducible_failure(fresh_server, tmp_path):
    store = open_store(tmp_path / "x.db")
    camp = parse_campaign(campaign_text(fresh_server.url, models=("tiny-b",), reps=4), "x.toml")
    outcome = run_campaign(store, camp, echo=lambda line: fresh_server.kill() if line.startswith("[1/4]") else None)
    (cav,) = _by_rule(_view(store, outcome.run_id))["exception_rate"]
    assert cav.params["failed"] == ("int", 3) and cav.params["total"] == ("int", 4)
    assert cav.params["kind"] == ("code", "connection")
    # one sentence for any two counts, in both languages; the client's error text is quoted evidence
    en, de = (render_caveat(cav, Lang(code))["text"] for code in ("en", "de"))
    assert "requests failed with the same error (`connection`: <q>" in en and "</q>): 3 of 4." in en
    assert "Anfragen scheiterten mit demselben Fehler (`connection`: <q>" in de and "</q>): 3 von 4." in de
