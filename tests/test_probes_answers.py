"""The reasoning probe reads answers as a reader does, checked against real model answers read by hand.

The corpus (tests/fixtures/probe_answers.json) holds real replies to the
probe's puzzles: SmolLM2-135M-Instruct's on a real llama-server (all three
rungs of the demo's ladder, the probe's prompt with and without its ANSWER
instruction, temperature 0 and 0.7), and answers of other models quoted in
public write-ups. Each carries the value a reader takes from it and where it
came from. A "last number" reader gets many of them wrong: "It would take 100
machines 5 minutes to make 100 widgets" is 5 minutes, not 100.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardproof.daemon.probes import reasoning
from cardproof.daemon.probes.answers import read

CORPUS = json.loads((Path(__file__).parent / "fixtures" / "probe_answers.json").read_text())["answers"]


def answer(content: str, finish: str = "stop") -> dict:
    return {"choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}]}


def test_the_corpus_is_real_and_large_enough():
    assert len(CORPUS) >= 30
    assert len({e["id"] for e in CORPUS}) == len(CORPUS)
    assert len({e["answer"] for e in CORPUS}) == len(CORPUS)  # no answer counted twice
    kinds = {e["source"]["kind"] for e in CORPUS}
    assert kinds == {"recorded", "public"}
    for e in CORPUS:
        assert e["task"] in reasoning.TASKS and e["question"] and e["answer"] and e["why"], e["id"]
        src = e["source"]
        assert (src.get("model") and src.get("server") and src.get("sampling")) if src["kind"] == "recorded" \
            else src["url"].startswith("https://github.com/"), e["id"]


@pytest.mark.parametrize("entry", CORPUS, ids=[e["id"] for e in CORPUS])
def test_every_answer_of_the_corpus_is_read_as_a_reader_reads_it(entry):
    got = read(entry["answer"], reasoning.TASKS[entry["task"]]["asked"])
    want = entry["reading"]
    assert (got.value is None) == (want is None), (got, entry["why"])
    if want is not None:
        assert got.value == pytest.approx(want), (got, entry["why"])


def test_the_widgets_answers_of_the_demo_get_their_verdicts():
    """All three rungs answered the known form correctly and the changed one with the famous 7 minutes."""
    spec = reasoning.TASKS["widgets"]
    known = reasoning.judge(answer("It would take 100 machines 5 minutes to make 100 widgets."),
                            spec["known"][1], None, spec["asked"])
    assert known[:2] == ("PASS", "correct") and known[2]["answer"] == 5 and known[2]["read_from"] == "unit"
    changed = reasoning.judge(answer("It would take 70 machines 7 minutes to make 140 gadgets."),
                              spec["changed"][1], spec["recall"], spec["asked"])
    assert changed[:2] == ("OK_model_ran_and_was_wrong", "recalled_famous_answer") and changed[2]["answer"] == 7


def test_the_asked_format_wins_and_is_recorded():
    spec = reasoning.TASKS["bat_ball"]
    verdict, arm, detail = reasoning.judge(answer("The racket is $2.15, so the shuttlecock costs 15 cents.\nANSWER: 15"),
                                           spec["changed"][1], spec["recall"], spec["asked"])
    assert (verdict, arm, detail["format_followed"], detail["read_from"]) == ("PASS", "correct", True, "answer_line")
    # an echo of the instruction is no ANSWER line: the format was not followed, the answer is still read
    echo = reasoning.judge(answer("It would take 100 machines 5 minutes.\n\nA final line to the form ANSWER: <number>"),
                           [5], None, reasoning.TASKS["widgets"]["asked"])
    assert echo[0] == "PASS" and echo[2]["format_followed"] is False


def test_a_reply_that_only_restates_the_question_has_no_answer():
    spec = reasoning.TASKS["lily_pad"]
    verdict, arm, detail = reasoning.judge(
        answer("The patch of algae doubles every day, covering the entire pond on day 30."),
        spec["changed"][1], spec["recall"], spec["asked"])
    assert (verdict, arm, detail["answer"], detail["read_from"]) == ("FAIL", "no_answer", None, "only_other_quantities")
