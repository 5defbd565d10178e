"""coding: small functions, written by the model, run against tests in a bounded subprocess.

Four tasks with a handful of tests each, from a floor that any instruct model
should clear (summing a list) to three that separate models. The floor keeps
the probe informative for small models: without it a 135M model and a broken
chat template both read 0/3. The model's reply must contain a Python function
of the given name (a fenced block is asked for and counted as the format
followed; a bare ``def`` is taken too).
Arms: ``all_tests_passed`` (PASS), ``tests_failed`` (the code ran and was
wrong: OK_model_ran_and_was_wrong), ``does_not_compile`` / ``raised_on_load``
/ ``function_missing`` (FAIL_BROKEN: what came back is not a working
function), ``cut_at_max_tokens`` (FAIL: the reply stopped on the token limit
inside its code, so the code was never finished; the limit or a loop in the
model is to blame, not its syntax), ``time_limit`` / ``crashed`` (FAIL),
``no_code`` (FAIL).
"""

from __future__ import annotations

import re

from .base import Probe, ProbeContext, Unit, failed_request, message
from .sandbox import run_tests

TASKS = {
    "sum_list": {
        "prompt": "Write a Python function sum_list(numbers: list[int]) -> int that returns the sum of the numbers.",
        "tests": [[[[1, 2, 3]], 6], [[[]], 0], [[[-4, 4, 10]], 10], [[[7]], 7]],
    },
    "is_palindrome": {
        "prompt": ("Write a Python function is_palindrome(s: str) -> bool that returns True when s reads the "
                   "same forwards and backwards, ignoring case and every character that is not a letter or "
                   "digit."),
        "tests": [[["A man, a plan, a canal: Panama"], True], [["race a car"], False], [[""], True],
                  [["No 'x' in Nixon"], True], [["ab"], False], [["0P"], False]],
    },
    "merge_intervals": {
        "prompt": ("Write a Python function merge_intervals(intervals: list[list[int]]) -> list[list[int]] that "
                   "merges overlapping closed intervals and returns them sorted by start. Intervals that only "
                   "touch ([1, 2] and [2, 3]) overlap."),
        "tests": [[[[[1, 3], [2, 6], [8, 10], [15, 18]]], [[1, 6], [8, 10], [15, 18]]],
                  [[[[1, 4], [4, 5]]], [[1, 5]]], [[[]], []], [[[[5, 7], [1, 2]]], [[1, 2], [5, 7]]],
                  [[[[1, 10], [2, 3], [4, 5]]], [[1, 10]]]],
    },
    "roman_to_int": {
        "prompt": "Write a Python function roman_to_int(s: str) -> int that converts a Roman numeral to an integer.",
        "tests": [[["III"], 3], [["LVIII"], 58], [["MCMXCIV"], 1994], [["IV"], 4], [["MMXXVI"], 2026],
                  [["XLIX"], 49]],
    },
}
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
    if code is None:
        arm = "no_code_within_max_tokens" if msg["finish_reason"] == "length" else "no_code"
        return "FAIL", arm, base, 0.0
    result = run_tests(code, task, spec["tests"], timeout_s=timeout_s)
    ms = result.pop("duration_ms", 0.0)
    detail = base | {"code": code, "result": result}
    if result["stage"] == "ran":
        if result["passed"] == result["total"]:
            return "PASS", "all_tests_passed", detail, ms
        return "OK_model_ran_and_was_wrong", "tests_failed", detail, ms
    if result["stage"] == "compile" and msg["finish_reason"] == "length":
        return "FAIL", "cut_at_max_tokens", detail, ms
    verdict, arm = _STAGES.get(result["stage"], ("FAIL", "crashed"))
    return verdict, arm, detail, ms


def run(ctx: ProbeContext) -> list[Unit]:
    units = []
    for task, spec in TASKS.items():
        body = {"messages": [{"role": "user", "content": spec["prompt"] + SUFFIX}]}
        resp, ms, err = ctx.ask(body)
        exchange = {"requests": [body], "responses": [resp]}
        if err:
            units.append(failed_request(task, err, ms, exchange))
            continue
        verdict, arm, detail, test_ms = judge(resp, task, timeout_s=ctx.code_timeout_s)
        units.append(Unit(task, verdict, arm, ms + test_ms, exchange, detail=detail))
    return units


PROBE = Probe("coding", None, "small functions run against tests in a bounded subprocess", run, order=40,
              asked_format="the function in one fenced `python` code block")
