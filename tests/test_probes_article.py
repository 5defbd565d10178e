"""What the article and the evidence page say about probe verdicts, on the demo ladder's real answers.

The answers are SmolLM2-135M-Instruct's at Q4_1, Q8_0 and F16 on a real
llama-server, recorded once and replayed (tests/probe_ladder.py); the store
is real SQLite, the probes judge the answers with their own code, and the
pages are rendered with the report's own environment in both languages.
"""

from __future__ import annotations

import pytest

from cardproof.report.i18n import CATALOGUE, Lang
from cardproof.report.mdsafe import translator
from cardproof.report.probes import decision_view
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
