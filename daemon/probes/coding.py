"""coding: small functions, written by the model, run against tests in a bounded subprocess.

Four tasks with a handful of tests each, from a floor that any instruct model
should clear (summing a list) to three that separate models. The floor keeps
the probe informative for small models: without it a 135M model and a broken
chat template both read 0/3. The model's reply must contain a Python function
of the given name (a fenced block is asked for and counted as the format
followed; a bare ``def`` is taken too).

Each task's token budget comes from its reference solution, counted in the
model's own tokenizer (the server's ``/tokenize``; where it has none, from its
characters) with :data:`HEADROOM`, and never below the campaign's ``[probes]
max_tokens``: a budget that cuts a correct answer would grade the budget, not
the model.

Arms: ``all_tests_passed`` (PASS), ``tests_failed`` (the code ran and was
wrong: OK_model_ran_and_was_wrong), ``does_not_compile`` / ``raised_on_load``
/ ``function_missing`` (FAIL_BROKEN: what came back is not a working
function), ``looping`` (FAIL_BROKEN: the reply repeats itself, a dict with the
same keys again and again or the same line, instead of working code),
``cut_at_max_tokens`` (FAIL: the reply stopped on the token limit, at least
twice the reference's length, inside its code without repeating itself),
``time_limit`` / ``crashed`` (FAIL), ``no_code`` / ``no_code_within_max_tokens``
(FAIL).
"""

from __future__ import annotations

import math
import re

from cardproof.marks import N_
from .base import Probe, ProbeContext, Unit, failed_request, message
from .looping import looping
from .sandbox import run_tests

TASKS = {
    "sum_list": {
        "prompt": "Write a Python function sum_list(numbers: list[int]) -> int that returns the sum of the numbers.",
        "tests": [[[[1, 2, 3]], 6], [[[]], 0], [[[-4, 4, 10]], 10], [[[7]], 7]],
        "reference": "def sum_list(numbers: list[int]) -> int:\n    return sum(numbers)\n",
    },
    "is_palindrome": {
        "prompt": ("Write a Python function is_palindrome(s: str) -> bool that returns True when s reads the "
                   "same forwards and backwards, ignoring case and every character that is not a letter or "
                   "digit."),
        "tests": [[["A man, a plan, a canal: Panama"], True], [["race a car"], False], [[""], True],
                  [["No 'x' in Nixon"], True], [["ab"], False], [["0P"], False]],
        "reference": ("def is_palindrome(s: str) -> bool:\n"
                      "    kept = [c.lower() for c in s if c.isalnum()]\n"
                      "    return kept == kept[::-1]\n"),
    },
    "merge_intervals": {
        "prompt": ("Write a Python function merge_intervals(intervals: list[list[int]]) -> list[list[int]] that "
                   "merges overlapping closed intervals and returns them sorted by start. Intervals that only "
                   "touch ([1, 2] and [2, 3]) overlap."),
        "tests": [[[[[1, 3], [2, 6], [8, 10], [15, 18]]], [[1, 6], [8, 10], [15, 18]]],
                  [[[[1, 4], [4, 5]]], [[1, 5]]], [[[]], []], [[[[5, 7], [1, 2]]], [[1, 2], [5, 7]]],
                  [[[[1, 10], [2, 3], [4, 5]]], [[1, 10]]]],
        "reference": ("def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:\n"
                      "    merged = []\n"
                      "    for start, end in sorted(intervals):\n"
                      "        if merged and start <= merged[-1][1]:\n"
                      "            merged[-1][1] = max(merged[-1][1], end)\n"
                      "        else:\n"
                      "            merged.append([start, end])\n"
                      "    return merged\n"),
    },
    "roman_to_int": {
        "prompt": "Write a Python function roman_to_int(s: str) -> int that converts a Roman numeral to an integer.",
        "tests": [[["III"], 3], [["LVIII"], 58], [["MCMXCIV"], 1994], [["IV"], 4], [["MMXXVI"], 2026],
                  [["XLIX"], 49]],
        "reference": ("def roman_to_int(s: str) -> int:\n"
                      "    values = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n"
                      "    total = 0\n"
                      "    for i, c in enumerate(s):\n"
                      "        v = values[c]\n"
                      "        total += -v if i + 1 < len(s) and values[s[i + 1]] > v else v\n"
                      "    return total\n"),
    },
}
#: a task's budget is this many times its reference reply (the fenced reference) in the model's tokens
HEADROOM = 2.0
# characters per token where the server cannot count: low for code, so the estimate errs towards more
_CHARS_PER_TOKEN = 3.0
SUFFIX = "\nReply with the complete function in one ```python code block. Use only the standard library."

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str, function: str) -> str | None:
    """The code block that defines ``function``; else everything from a bare ``def`` on."""
    blocks = _FENCE.findall(text)
    for block in blocks:
        if re.search(rf"^\s*def\s+{function}\s*\(", block, re.MULTILINE):
            return block
    m = re.search(rf"^def\s+{function}\s*\(", text, re.MULTILINE)
    if m:
        return text[m.start():].split("```")[0]
    return None


_STAGES = {
    "compile": ("FAIL_BROKEN", "does_not_compile"),
    "import": ("FAIL_BROKEN", "raised_on_load"),
    "missing": ("FAIL_BROKEN", "function_missing"),
    "timeout": ("FAIL", "time_limit"),
    "crashed": ("FAIL", "crashed"),
}


def followed_format(text: str, function: str) -> bool:
    """Whether the reply holds the asked form: a fenced code block that defines ``function``."""
    return any(re.search(rf"^\s*def\s+{function}\s*\(", b, re.MULTILINE) for b in _FENCE.findall(text))


def judge(resp: dict, task: str, *, timeout_s: float = 10.0) -> tuple[str, str, dict, float]:
    """Verdict, arm, detail and the test run's milliseconds for one reply."""
    msg = message(resp)
    spec = TASKS[task]
    code = extract_code(msg["content"], task)
    base = {"finish_reason": msg["finish_reason"], "format_followed": followed_format(msg["content"], task)}
    loop = looping(msg["content"])
    if code is None:
        if loop:
            return "FAIL_BROKEN", "looping", base | {"looping": loop}, 0.0
        arm = "no_code_within_max_tokens" if msg["finish_reason"] == "length" else "no_code"
        return "FAIL", arm, base, 0.0
    result = run_tests(code, task, spec["tests"], timeout_s=timeout_s)
    ms = result.pop("duration_ms", 0.0)
    detail = base | {"code": code, "result": result}
    if result["stage"] == "ran":
        if result["passed"] == result["total"]:
            return "PASS", "all_tests_passed", detail, ms
        return "OK_model_ran_and_was_wrong", "tests_failed", detail, ms
    if loop:  # code that does not work and repeats itself: the repetition is what went wrong
        return "FAIL_BROKEN", "looping", detail | {"looping": loop}, ms
    if result["stage"] == "compile" and msg["finish_reason"] == "length":
        return "FAIL", "cut_at_max_tokens", detail, ms
    verdict, arm = _STAGES.get(result["stage"], ("FAIL", "crashed"))
    return verdict, arm, detail, ms


def reference_reply(task: str) -> str:
    """The reference solution as the asked reply: one fenced Python block."""
    return f"```python\n{TASKS[task]['reference']}```"


def budget(ctx: ProbeContext, task: str) -> dict:
    """The task's ``max_tokens`` and how it was found: the reference reply's length in the model's tokens
    (or estimated from characters) times :data:`HEADROOM`, at least the campaign's ``max_tokens``."""
    text = reference_reply(task)
    counted = ctx.backend.count_tokens(ctx.model, text)
    how = "tokenizer"
    if not counted:
        counted, how = math.ceil(len(text) / _CHARS_PER_TOKEN), "characters"
    derived = math.ceil(counted * HEADROOM)
    return {"max_tokens": max(derived, ctx.max_tokens), "reference_tokens": counted, "counted_by": how,
            "headroom": HEADROOM, "campaign_max_tokens": ctx.max_tokens}


def run(ctx: ProbeContext) -> list[Unit]:
    units = []
    for task, spec in TASKS.items():
        limit = budget(ctx, task)
        body = {"messages": [{"role": "user", "content": spec["prompt"] + SUFFIX}], "max_tokens": limit["max_tokens"]}
        resp, ms, err = ctx.ask(body)
        exchange = {"requests": [body], "responses": [resp]}
        if err:
            unit = failed_request(task, err, ms, exchange)
            unit.detail["budget"] = limit
            units.append(unit)
            continue
        verdict, arm, detail, test_ms = judge(resp, task, timeout_s=ctx.code_timeout_s)
        units.append(Unit(task, verdict, arm, ms + test_ms, exchange, detail=detail | {"budget": limit}))
    return units


def facts(say) -> dict[str, str]:
    """The counts the defects register quotes, from :data:`TASKS` itself: tasks, tests per task, a full score."""
    from .defects import number_words, span_words

    tests = sorted(len(spec["tests"]) for spec in TASKS.values())
    n = len(TASKS)
    return {"tasks": number_words(n, say), "tests": span_words(tests[0], tests[-1], say),
            "all": f"{n}/{n}", "all_but_one": f"{n - 1}/{n}"}


PROBE = Probe("coding", None, "small functions run against tests in a bounded subprocess", run, order=40,
              asked_format=N_("the function in one fenced `python` code block"), facts=facts)
