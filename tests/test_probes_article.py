"""What the article and the evidence page say about probe verdicts, on the demo ladder's real answers.

The answers are SmolLM2-135M-Instruct's at Q4_1, Q8_0 and F16 on a real
llama-server, recorded once and replayed (tests/probe_ladder.py); the store
is real SQLite, the probes judge the answers with their own code, and the
pages are rendered with the report's own environment in both languages.
"""

from __future__ import annotations

import copy
import json

import pytest

from cardproof.daemon.store import open_store
from cardproof.report.i18n import CATALOGUE, Lang
from cardproof.report.mdsafe import translator
from cardproof.report.probes import _difference, decision_view, not_separating
from cardproof.report.render import environment
from probe_ladder import LADDER, ladder_store


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    store, run_id = ladder_store(tmp_path_factory.mktemp("ladder") / "ladder.db")
    yield store, run_id, decision_view(store.db, run_id)
    store.close()


def _section(decision: dict, lang: str) -> str:
    L = Lang(lang)
    return str(environment().get_template("sections/decision.md.j2").render(
        decision=decision, _=translator(L.gettext, CATALOGUE), L=L))


def _probe(decision: dict, model: str, probe: str) -> dict:
    return next(p for m in decision["probes"] if m["model"] == model for p in m["probes"] if p["probe"] == probe)


def test_how_many_answers_followed_the_asked_format_is_stated(ladder):
    """SmolLM2 never wrote the ANSWER line it was asked for; it wrote three of its four functions in a
    fenced block (the fourth looped until the limit, and its block never closed)."""
    _, _, decision = ladder
    for model in LADDER:
        assert _probe(decision, model, "reasoning")["format"] == {"followed": 0, "answers": 6}
        assert _probe(decision, model, "coding")["format"] == {"followed": 3, "answers": 4}
        assert _probe(decision, model, "tools")["format"] is None  # asks no form
    en, de = _section(decision, "en"), _section(decision, "de")
    assert "`reasoning`: a last line `ANSWER:` with the number;" in en
    assert "`coding`: the function in one fenced `python` code block." in en
    assert en.count("0 of 6 answers followed the asked format") == 3
    assert en.count("3 of 4 answers followed the asked format") == 3
    assert "- smollm2-q8\\_0 · `reasoning`: 0 of 6 answers followed the asked format" in en
    assert de.count("0 von 6 Antworten hielten das verlangte Format ein") == 3
    assert "eine letzte Zeile `ANSWER:` mit der Zahl" in de


def test_each_tasks_arm_is_shown_not_only_the_worst(ladder):
    _, _, decision = ladder
    coding = _probe(decision, "smollm2-f16", "coding")
    assert [(t["variant"], t["arm"]) for t in coding["tasks"]] == [
        ("sum_list", "all_tests_passed"), ("is_palindrome", "tests_failed"), ("merge_intervals", "tests_failed"),
        ("roman_to_int", "looping")]
    assert coding["arm"] == "looping"  # the summary's arm: that of the worst verdict only
    en = _section(decision, "en")
    assert ("| `FAIL_BROKEN` 1/4 | sum\\_list: `all_tests_passed`; is\\_palindrome: `tests_failed`; "
            "merge\\_intervals: `tests_failed`; roman\\_to\\_int: `looping` |") in en
    assert "| Arm of each task |" in en and "| Zweig jeder Aufgabe |" in _section(decision, "de")


def test_a_probe_on_which_every_model_passes_the_same_tasks_does_not_separate_them(ladder):
    """All three rungs passed sum_list and no other coding task, and no reasoning task: neither probe tells
    them apart, whatever the arms of their failures."""
    _, _, decision = ladder
    got = {n["probe"]: n["passed"] for n in decision["not_separating"]}
    assert got["coding"] == ["sum_list"] and got["reasoning"] == []
    en, de = _section(decision, "en"), _section(decision, "de")
    assert "**Probes that do not separate the models**" in en
    assert "- `coding`: each model passed `sum_list` and no other task" in en
    assert "- `reasoning`: no model passed a task" in en
    assert "- `coding`: jedes Modell bestand `sum_list` und keine andere Aufgabe" in de
    # one model passing one more task separates them: the probe is no longer listed
    probes = copy.deepcopy(decision["probes"])
    task = next(t for p in probes[1]["probes"] if p["probe"] == "coding" for t in p["tasks"] if t["variant"] == "roman_to_int")
    task["verdict"] = "PASS"
    assert "coding" not in {n["probe"] for n in not_separating(probes)}


def test_the_same_tasks_passed_is_no_difference_between_candidate_and_incumbent():
    s = lambda verdict, arms: {"verdict": verdict, "passed": 1, "total": 2, "unstable": [], "arm": arms[-1][1],
                               "defects": [], "tasks": [{"variant": v, "verdict": x, "arm": a} for v, x, a in arms]}
    cand = s("FAIL_BROKEN", [("sum_list", "PASS", "all_tests_passed"), ("roman", "FAIL_BROKEN", "looping")])
    inc = s("OK_model_ran_and_was_wrong", [("sum_list", "PASS", "all_tests_passed"), ("roman", "OK_model_ran_and_was_wrong",
                                                                                     "tests_failed")])
    d = _difference("coding", cand, inc, "c", "i")
    assert (d["kind"], d["reason"]) == ("does_not_count", "same_tasks")
    inc["tasks"][0]["verdict"], inc["tasks"][1]["verdict"] = "OK_model_ran_and_was_wrong", "PASS"
    assert _difference("coding", cand, inc, "c", "i")["kind"] == "counts"  # one task each, but not the same one
    assert _difference("coding", cand, inc, "c", "i")["tasks"] == 2


def test_an_invented_tool_result_gets_one_line_per_model(ladder):
    """SmolLM2's template shows it no tools; asked to use them it answered anyway, with a temperature (Q4_1:
    "1.8°C"), "mostly sunny" (Q8_0, F16) and a conversion rate of its own."""
    _, _, decision = ladder
    made = {f["model"]: f for f in decision["fabrications"]}
    assert set(made) == set(LADDER)
    assert [t["variant"] for t in made["smollm2-q4_1"]["tasks"]] == ["weather", "currency"]
    assert "1.8°C" in made["smollm2-q4_1"]["tasks"][0]["quote"]
    en = _section(decision, "en")
    lines = [ln for ln in en.splitlines() if "called no tool and stated what only the tool could have said" in ln]
    assert len(lines) == 3 and all(ln.startswith("- smollm2-") for ln in lines)
    assert "its chat template declares no tools, so it never saw them" in lines[0] and "1.8°C" in lines[0]
    assert "rief kein Werkzeug auf" in _section(decision, "de")


def test_answers_that_differ_across_the_ladder_are_a_fact_about_the_ladder(ladder):
    """The rungs are one base model (Q8_0 and F16 requantized from Q4_1), asked at temperature 0 with one
    seed; still their answers differ, to the bat-and-ball variant among others."""
    _, _, decision = ladder
    [group] = decision["ladder"]
    assert sorted(group["models"]) == sorted(LADDER) and group["questions"] == 14
    differ = {(d["probe"], d["variant"]) for d in group["differ"]}
    assert ("reasoning", "bat_ball/changed") in differ and ("reasoning", "widgets/changed") not in differ
    assert len(differ) == 11
    en = _section(decision, "en")
    assert ("smollm2-q4\\_1, smollm2-q8\\_0, smollm2-f16, asked at temperature 0 with one seed, gave different "
            "answers to 11 of 14 probe questions") in en
    assert "The format changes what the model says, not only how fast it says it." in en
    assert "gaben auf 11 von 14 Fragen der Prüfungen verschiedene Antworten" in _section(decision, "de")


@pytest.mark.parametrize("task, said, invented", [
    ("weather", "The weather in Oslo is currently 1.8°C (32°F).", True),
    ("weather", "I can't check the weather without the tool.", False),
    ("currency", "So, 250 euros is equivalent to 1000 Norwegian kroner.", True),
    ("currency", "You need to multiply 250 by 1.0526.", True),
    ("currency", "250 euros is a sum I cannot convert without the tool.", False),
    ("pick_tool", "It is 14:05 in Tokyo.", True),
    ("pick_tool", "I don't have the capability to access real-time time information.", False),
])
def test_what_only_the_tool_could_have_said(task, said, invented):
    from cardproof.daemon.probes import tools

    resp = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": said}}]}
    assert tools.judge_call(tools.TASKS[task], resp)[1] == ("fabricated_result" if invented else "no_tool_call")


def _exchanges(decision: dict, lang: str) -> str:
    L = Lang(lang)
    return str(environment().get_template("sections/probe_exchanges.md.j2").render(
        decision=decision, run={"id": 7}, _=translator(L.gettext, CATALOGUE), L=L))


def test_every_exchange_is_on_the_evidence_page_whole(ladder):
    store, run_id, decision = ladder
    page = _exchanges(decision, "en")
    rows = list(store.db.query("select id, exchange_json from probe_results where run_id = ?", [run_id]))
    for r in rows:
        assert f'<span id="probe-{r["id"]}"></span>' in page
        for resp in json.loads(r["exchange_json"])["responses"]:
            content = resp["choices"][0]["message"].get("content") or ""
            for line in content.splitlines():  # every line of every answer, none cut
                assert line.strip() in page, line
    roman = next(e for m in decision["probes"] if m["model"] == "smollm2-q4_1" for p in m["probes"]
                 for e in p["results"] if e["variant"] == "roman_to_int")
    assert len(roman["answer"]) > 400 and roman["long"]  # 400 characters was the old cut
    # the question whole, the tools offered, what was read and why
    assert "Write a Python function roman_to_int(s: str) -> int that converts a Roman numeral to an integer." in page
    assert "**Tools offered**: `get_weather(city)` — Current weather for a city." in page
    assert ("- Read: **7**, the last number attached to the asked unit, not said of something else: "
            "`It would take 70 machines 7 minutes to make 140 gadgets`. Expected: 14; the well-known form’s answer: 7.") in page
    assert "- Repeats itself: `the key 'CMXXIIXCIX'" in page
    assert "- Tests: 4 of 6 passed; `[\"A man, a plan, a canal: Panama\"]` → `false`, expected `true`" in page
    # short exchanges open, long ones folded
    assert '    ??? abstract "roman\\_to\\_int #1: FAIL\\_BROKEN, looping' in page
    assert '    ???+ abstract "sum\\_list #1: PASS, all\\_tests\\_passed' in page
    de = _exchanges(decision, "de")
    assert "**Angebotene Werkzeuge**" in de and "- Gelesen: **7**" in de


def test_an_exchange_is_shown_as_text_whatever_it_holds(ladder, tmp_path):
    """A hostile answer (fences, HTML, an admonition) stays inside its code block; a question too."""
    store, run_id, _ = ladder
    hostile = "```\n</details><script>alert(1)</script>\n!!! danger \"x\"\n    <!-- open"
    row = store.db.execute("select id, exchange_json from probe_results where run_id = ? and variant = 'weather' "
                           "order by id limit 1", [run_id]).fetchone()
    ex = json.loads(row[1])
    ex["responses"][0]["choices"][0]["message"]["content"] = hostile
    ex["requests"][0]["messages"][0]["content"] = "Weather? <img src=x onerror=alert(2)>"
    copy_db = tmp_path / "hostile.db"
    store.db.conn.execute(f"vacuum into '{copy_db}'")
    other = open_store(copy_db)
    other.db.execute("update probe_results set exchange_json = ? where id = ?", [json.dumps(ex), row[0]])
    other.db.conn.commit()
    page = _exchanges(decision_view(other.db, run_id), "en")
    other.close()
    assert "````text\n        ```\n        <\u2060/details><\u2060script>alert(1)<\u2060/script>" in page
    assert "<script>" not in page and "<img" not in page and "<!--" not in page


@pytest.mark.parametrize("cand,inc,en,de", [
    (None, None, "not measured on the card for either model", "für keines der beiden Modelle auf der Karte gemessen"),
    (4096.0, None, "measured on the card for one of the two models only", "nur für eines der beiden Modelle"),
    (None, 4096.0, "measured on the card for one of the two models only", "nur für eines der beiden Modelle"),
])
def test_card_memory_missing_for_one_or_both_is_said_as_it_is(cand, inc, en, de):
    """"not measured … for both models" read as "for at most one" in German where the English meant "for
    neither"; a card read for one model only is now a sentence of its own in both languages."""
    from cardproof.report.i18n import Lang
    from cardproof.report.render import environment

    decision = {"any": True, "rules": [], "incumbent": "inc", "probes": [], "asked_formats": [], "fabrications": [],
                "ladder": None, "limits": [], "not_separating": [], "registration": None,
                "candidates": [{"model": "cand", "rules": [], "speed": [], "memory_ratio": None, "card_mib": cand,
                                "inc_card_mib": inc, "differences": [], "capability_gaps": []}]}
    for lang, want in (("en", en), ("de", de)):
        L = Lang(lang)
        text = environment().get_template("sections/decision.md.j2").render(
            decision=decision, L=L, _=L.gettext, ngettext=L.ngettext)
        line = next(ln for ln in text.splitlines() if ln.startswith(L.gettext("Memory on the card")))
        assert want in line, line
