"""Probes and pass rules in a real run against the real llama-server (router mode, tiny models).

The tiny models have random weights: every probe must fail, and say so
honestly (FAIL / OK_model_ran_and_was_wrong with the arm, NOT_CAPABLE where
nothing was declared, DECLARED_NOT_DELIVERED where something was), never
crash. Probes run while their model is loaded and never touch the pin.
"""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.probes import VERDICTS
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import _env
from cardproof.report.i18n import Lang
from cardproof.report.probes import _difference, decision_view, rule_outcomes
from conftest import campaign_text

RULES = """
[probes]
max_tokens = 8
repeat = 2
code_timeout_s = 5

[rules]
fits = 'offloaded_layers == total_layers and probe.tools == "PASS" and decode.short >= 1'
declared = 'probe.vision == "NOT_CAPABLE" and probe.coding.total == 4'
pace = 'decode.short >= 0.5 * incumbent.decode.short'
"""


def _status(url: str) -> dict:
    return {m["id"]: (m.get("status") or {}).get("value") for m in httpx.get(url + "/models", timeout=10).json()["data"]}


@pytest.fixture(scope="module")
def probed(llama_server, tmp_path_factory):
    url = llama_server.url
    db = tmp_path_factory.mktemp("probes") / "p.db"
    store = open_store(db)
    camp = parse_campaign(campaign_text(url, models=("tiny-b", "tiny-a"), reps=2, pinned="tiny-a") + RULES, "p.toml")
    seen, lines = {}, []

    def echo(line: str) -> None:
        lines.append(line)
        if line.startswith("probes on "):
            seen["start " + line.split()[2].rstrip(":")] = _status(url)
        if line.startswith("probe vision on tiny-a: ") and "attempt" not in line:
            seen["end tiny-a"] = _status(url)

    outcome = run_campaign(store, camp, echo=echo)
    yield store, outcome, seen, lines, db
    store.close()


def test_probes_fail_honestly_and_never_crash(probed):
    store, outcome, _, lines, _ = probed
    assert outcome.status == "completed" and outcome.exit_code == 0
    rows = list(store.db.query("select probe_results.*, models.name as model from probe_results "
                               "join models on models.id = model_id where run_id = ?", [outcome.run_id]))
    assert {r["model"] for r in rows} == {"tiny-a", "tiny-b"}
    assert all(r["verdict"] in VERDICTS and r["arm"] for r in rows)
    erred = [(r["model"], r["probe"], r["variant"], r["arm"]) for r in rows if r["verdict"] == "ERROR"]
    assert not erred, f"nothing may err: {erred}"
    # random weights cannot pass, except by chance on thinking: the tiny vocabulary holds <think> and
    # </think>, so a sampled answer can open and close a trace (seen once in CI); such a PASS must
    # rest on a real split, a non-empty trace and a non-empty answer in the stored detail
    passed = [r for r in rows if r["verdict"] == "PASS"]
    assert all(r["probe"] == "thinking" for r in passed), [(r["probe"], r["arm"]) for r in passed]
    for r in passed:
        detail = json.loads(r["detail_json"])
        assert r["arm"] == "separate_channel" and detail["trace_chars"] > 0 and detail["answer_chars"] > 0, detail
    by = lambda probe: {r["verdict"] for r in rows if r["probe"] == probe and r["graded"]}
    # tools never declared by the tiny template: the failure is not counted against the model
    assert by("tools") == {"NOT_CAPABLE"}
    assert {r["raw_verdict"] for r in rows if r["probe"] == "tools"} <= {"FAIL", "FAIL_BROKEN", "OK_model_ran_and_was_wrong"}
    # the template has a thinking switch: declared, and random weights do not deliver a separate trace
    assert by("thinking") <= {"DECLARED_NOT_DELIVERED", "INCONCLUSIVE", "PASS"}
    assert by("reasoning") <= {"FAIL", "OK_model_ran_and_was_wrong"}
    assert by("coding") <= {"FAIL", "FAIL_BROKEN", "OK_model_ran_and_was_wrong"}
    # vision was never declared: not even sent
    vision = [r for r in rows if r["probe"] == "vision"]
    assert {r["verdict"] for r in vision} == {"NOT_CAPABLE"} and all(r["request_sha256"] is None for r in vision)
    # every asked probe kept its raw exchange; two attempts each on identical input
    asked = [r for r in rows if r["probe"] != "vision"]
    assert all(json.loads(r["exchange_json"])["responses"][0]["choices"] for r in asked)
    assert {r["attempt"] for r in rows} == {1, 2}
    caps = {r["model_id"]: json.loads(r["json"]) for r in store.db.query("select * from capabilities where run_id = ?",
                                                                          [outcome.run_id])}
    assert all(c["declared"] == {"tools": False, "thinking": True, "vision": False} for c in caps.values())
    assert any(line.startswith("probe coding on tiny-b: ") and "/4" in line for line in lines)


def test_probes_run_while_their_model_is_loaded_and_leave_the_pin(probed):
    _, _, seen, _, _ = probed
    assert seen["start tiny-b"]["tiny-b"] == "loaded"
    assert seen["start tiny-a"]["tiny-a"] == "loaded"
    assert seen["end tiny-a"]["tiny-a"] == "loaded"  # the pinned model is still there after its probes


def test_rules_outcomes_per_arm_from_the_frozen_text(probed):
    store, outcome, _, _, _ = probed
    rules = {r["name"]: r for r in rule_outcomes(store.db, outcome.run_id)}
    assert set(rules) == {"fits", "declared", "pace"}
    assert all(r["pre_registered"] for r in rules.values())
    fits = {m["model"]: m for m in rules["fits"]["models"]}
    assert fits["tiny-b"]["outcome"] == "fail"
    assert [a["outcome"] for a in fits["tiny-b"]["arms"]][1] == "fail"  # probe.tools is NOT_CAPABLE
    assert {m["outcome"] for m in rules["declared"]["models"]} == {"pass"}
    pace = {m["model"]: m for m in rules["pace"]["models"]}["tiny-b"]
    if pace["outcome"] == "undecided":  # no GPU here: not_on_card leaves no sample for a median
        assert "decode.short" in pace["arms"][0]["missing"]


def test_a_rule_changed_after_the_run_is_no_pass(probed, tmp_path):
    _, outcome, _, _, db = probed
    copy = tmp_path / "tampered.db"
    dst = sqlite3.connect(copy)
    sqlite3.connect(db).backup(dst)
    dst.execute("update rule_results set rule_text = 'probe.vision == \"NOT_CAPABLE\"' where rule_name = 'declared'")
    dst.commit()
    tampered = open_store(copy)
    rule = {r["name"]: r for r in rule_outcomes(tampered.db, outcome.run_id)}["declared"]
    assert not rule["pre_registered"] and not rule["checks"]["text_frozen"] and not rule["checks"]["hash_matches"]
    assert {m["outcome"] for m in rule["models"]} == {"unverified"}


def test_decision_section_renders_in_both_languages(probed):
    store, outcome, _, _, _ = probed
    view = decision_view(store.db, outcome.run_id)
    assert view["incumbent"] == "tiny-a" and [c["model"] for c in view["candidates"]] == ["tiny-b"]
    codes = {limit["code"] for limit in view["limits"]}
    assert {"duration", "one_run", "tasks", "defects"} <= codes
    for lang, words in (("en", ["### Pass rules\n", "NOT_CAPABLE", "What this run does not show"]),
                        ("de", ["### Bestehensregeln\n", "NOT_CAPABLE", "Was dieser Lauf nicht zeigt"])):
        L = Lang(lang)
        text = _env().get_template("sections/decision.md.j2").render(decision=view, _=L.gettext, L=L)
        for w in words:
            assert w in text, (lang, w)
        assert "probe.tools == \"PASS\"" in text and "offloaded\\_layers" in text  # the rule, escaped


def test_probes_command_lists_verdicts(probed):
    _, outcome, _, _, db = probed
    out = CliRunner().invoke(cli, ["probes", "--db", str(db), "--run", str(outcome.run_id)])
    assert out.exit_code == 0 and "tiny-a (pinned)" in out.output and "NOT_CAPABLE" in out.output
    js = CliRunner().invoke(cli, ["probes", "--db", str(db), "--json"])
    assert json.loads(js.output)["rules"]
    shown = CliRunner().invoke(cli, ["rules", "show", "--db", str(db)])
    assert shown.exit_code == 0 and "pre-registered" in shown.output


def test_differences_that_count_and_those_that_only_look_like_one():
    s = lambda verdict, passed, total=3, unstable=(), defects=(): {
        "verdict": verdict, "passed": passed, "total": total, "unstable": list(unstable), "arm": "a",
        "defects": list(defects)}
    assert _difference("coding", s("PASS", 3), s("FAIL", 2), "c", "i")["kind"] == "counts"
    assert _difference("coding", s("PASS", 3), s("FAIL", 2), "c", "i")["tasks"] == 1
    assert _difference("tools", s("PASS", 3), s("PASS", 3), "c", "i")["kind"] == "same"
    vision = _difference("vision", s("NOT_CAPABLE", 0, 2), s("PASS", 2, 2), "c", "i")
    assert (vision["kind"], vision["reason"], vision["model"]) == ("does_not_count", "not_capable", "c")
    thinking = _difference("thinking", s("FAIL", 0, 1), s("INCONCLUSIVE", 0, 1, unstable=["arithmetic"]), "c", "i")
    assert thinking["reason"] == "unstable" and thinking["model"] == "i"
    assert _difference("reasoning", s("PASS", 3), s("ERROR", 0), "c", "i")["reason"] == "no_grade"
    voided = _difference("coding", s("PASS", 3, defects=[{"defect": "d", "counts": False}]), s("FAIL", 2), "c", "i")
    assert voided["reason"] == "defect"


def test_thinking_probe_against_reasoning_samples_is_an_open_contradiction(probed, tmp_path):
    """The seeds' open contradiction: probe says no trace, samples carry 3135-4593 characters of one."""
    from cardproof.report.contradictions import thinking_probe_vs_samples
    from cardproof.report.queries import run_view

    _, outcome, _, _, db = probed
    copy = tmp_path / "reasoning.db"
    dst = sqlite3.connect(copy)
    sqlite3.connect(db).backup(dst)
    cell = dst.execute("select cells.id from cells join models on models.id = model_id "
                       "where run_id = ? and name = 'tiny-b' and kind = 'measure'", [outcome.run_id]).fetchone()[0]
    dst.execute("update cells set reasoning = 1 where id = ?", [cell])
    dst.execute("update samples set reasoning_chars = 3135 + id where cell_id = ?", [cell])
    dst.commit()
    store = open_store(copy)
    found = thinking_probe_vs_samples.detect(store.db, run_view(store.db, outcome.run_id))
    assert [c.key for c in found] == ["thinking:tiny-b"] and found[0].status == "open"
    assert all(e.startswith("probe-") for e in found[0].a.evidence)
    assert all(e.startswith("sample-") for e in found[0].b.evidence)
    assert "reasoning text" in found[0].b.text["en"]
