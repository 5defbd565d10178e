"""The coding probe's budget comes from a reference solution in the model's tokenizer; looping has its own arm.

At ``[probes] max_tokens = 160`` the demo's coding probe reported
``cut_at_max_tokens`` for ``roman_to_int``, a budget verdict: a compact
correct solution is well over 100 of SmolLM2's tokens with its fence. Each
task now asks for twice its reference reply's length in the model's own
tokens (llama-server's ``/tokenize``), and a reply that repeats itself
(SmolLM2 wrote the same dict keys over and over) is ``looping``, not "cut".
The token counts and answers are the real server's (tests/probe_ladder.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardproof.daemon.probes import coding
from cardproof.daemon.probes.base import ProbeContext
from cardproof.daemon.probes.looping import looping
from cardproof.daemon.probes.sandbox import run_tests
from probe_ladder import LADDER, RECORDING, Replay, ladder_store


def answer(content: str, finish: str = "stop") -> dict:
    return {"choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}]}


@pytest.mark.parametrize("task", list(coding.TASKS))
def test_every_reference_solution_passes_its_own_tests(task):
    spec = coding.TASKS[task]
    assert run_tests(spec["reference"], task, spec["tests"])["passed"] == len(spec["tests"])


def test_budgets_come_from_the_models_own_tokenizer():
    ctx = ProbeContext(Replay("smollm2-q4_1"), "smollm2-q4_1", {}, max_tokens=160)
    roman = coding.budget(ctx, "roman_to_int")
    # the real /tokenize count of the fenced reference, twice over: more than the demo's 160
    assert roman["counted_by"] == "tokenizer" and roman["reference_tokens"] > 100
    assert roman["max_tokens"] == 2 * roman["reference_tokens"] > 160
    # a short task keeps the campaign's own limit: the budget only ever grows
    assert coding.budget(ctx, "sum_list")["max_tokens"] == 160


def test_a_server_without_a_tokenizer_gets_a_budget_from_characters():
    class NoTokenizer(Replay):
        def count_tokens(self, model, text):
            return None

    ctx = ProbeContext(NoTokenizer("smollm2-q4_1"), "smollm2-q4_1", {}, max_tokens=16)
    got = coding.budget(ctx, "roman_to_int")
    assert got["counted_by"] == "characters"
    assert got["reference_tokens"] == -(-len(coding.reference_reply("roman_to_int")) // 3)
    assert got["max_tokens"] == 2 * got["reference_tokens"]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    store, run_id = ladder_store(tmp_path_factory.mktemp("budget") / "ladder.db", probes=("coding",))
    rows = list(store.db.query("select models.name as model, probe_results.* from probe_results "
                               "join models on models.id = model_id where run_id = ?", [run_id]))
    yield rows
    store.close()


def test_the_ladder_loops_on_roman_numerals_and_is_not_cut_by_the_budget(ladder):
    """Every rung wrote a dict literal of made-up numerals, the same keys again and again, until the
    budget (twice the reference) ended it: looping, with what repeats named; the other tasks as before."""
    by = {(r["model"], r["variant"]): r for r in ladder}
    for model in LADDER:
        roman = by[(model, "roman_to_int")]
        detail = json.loads(roman["detail_json"])
        assert (roman["verdict"], roman["arm"]) == ("FAIL_BROKEN", "looping"), detail
        assert detail["finish_reason"] == "length" and detail["looping"]
        assert detail["budget"]["max_tokens"] == 2 * detail["budget"]["reference_tokens"] > 160
        asked = json.loads(roman["exchange_json"])["requests"][0]
        assert asked["max_tokens"] == detail["budget"]["max_tokens"]
        assert (by[(model, "sum_list")]["verdict"], by[(model, "is_palindrome")]["arm"]) == ("PASS", "tests_failed")


@pytest.mark.parametrize("text, what", [
    ('roman = {\n    "M": 1000,\n    "CMXC": 990,\n    "CMXC": 990,\n    "CMXC": 990,\n', "'CMXC' 3 times"),
    ("x = 1\nprint('again')\nprint('again')\nprint('again')\n", "3 times in a row"),
    ("DCMYMM" + "U" * 40, "'U' repeated 40 times"),
])
def test_looping_names_what_repeats(text, what):
    assert what in looping(text)


def test_looping_does_not_fire_on_working_code_or_real_answers():
    for task in coding.TASKS:
        assert looping(coding.reference_reply(task)) is None
    corpus = json.loads((Path(__file__).parent / "fixtures" / "probe_answers.json").read_text())["answers"]
    assert [e["id"] for e in corpus if looping(e["answer"])] == []
    for model, rec in RECORDING["models"].items():
        for e in rec["exchanges"]:
            content = e["response"]["choices"][0]["message"].get("content") or ""
            if "roman_to_int" not in e["request"]["messages"][0]["content"]:
                assert looping(content) is None, (model, content[:200])


def test_code_cut_by_the_budget_without_repeating_itself_is_still_cut():
    cut = "```python\ndef roman_to_int(s: str) -> int:\n    values = {'I': 1, 'V': 5,\n"
    assert coding.judge(answer(cut, finish="length"), "roman_to_int")[:2] == ("FAIL", "cut_at_max_tokens")
