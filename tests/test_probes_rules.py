"""The pass-rule language: parsing, types, three-valued evaluation, and fuzzing with malformed input.

Every malformed rule must end in one RuleError with a one-line message;
nothing else may escape (no RecursionError, no TypeError), and nothing in a
rule is ever executed.
"""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cardproof.daemon.probes import VERDICTS
from cardproof.daemon.campaign.rules import MISSING, RuleError, arms, evaluate, lang, names, parse, validate_rule
from cardproof.daemon.campaign.rules.outcome import judge_rule

PROBES = ("tools", "thinking", "reasoning", "coding", "vision")
CLASSES = ("short", "medium", "long")


def check(text):
    return validate_rule(text, probes=PROBES, classes=CLASSES, verdicts=VERDICTS)


def test_the_issue_example_parses_into_three_arms():
    text = 'offloaded_layers == total_layers and probe.tools == "PASS" and decode.short >= 50'
    tree = check(text)
    assert [text[a.pos:a.end] for a in arms(tree)] == [
        "offloaded_layers == total_layers", 'probe.tools == "PASS"', "decode.short >= 50"]
    assert names(tree) == ["offloaded_layers", "total_layers", "probe.tools", "decode.short"]


def test_precedence_and_arithmetic():
    values = {"decode.short": 40.0, "incumbent.decode.short": 46.4}
    assert evaluate(parse("decode.short >= 0.8 * incumbent.decode.short"), values) is True
    assert evaluate(parse("1 + 2 * 3 == 7"), {}) is True
    assert evaluate(parse("(1 + 2) * 3 == 9"), {}) is True
    assert evaluate(parse("-2 - -3 == 1"), {}) is True
    assert evaluate(parse("not 1 > 2 and 2 > 1 or false"), {}) is True


def test_missing_values_make_a_rule_undecided_not_false():
    values = {"probe.tools": "PASS"}
    assert evaluate(parse('decode.short >= 50 and probe.tools == "PASS"'), values) is MISSING
    # a decided false arm decides the whole 'and'; a decided true arm the whole 'or'
    assert evaluate(parse('decode.short >= 50 and probe.tools == "FAIL"'), values) is False
    assert evaluate(parse('decode.short >= 50 or probe.tools == "PASS"'), values) is True
    assert evaluate(parse("not decode.short > 1"), {}) is MISSING
    res = judge_rule('decode.short >= 50 and probe.tools == "PASS"', values)
    assert res["outcome"] == "undecided"
    assert [a["outcome"] for a in res["arms"]] == ["undecided", "pass"]
    assert res["arms"][0]["missing"] == ["decode.short"]


def test_seed_rule_with_two_arms():
    """The seed's rule: all layers on the card AND the runtime's GPU share at 100 %."""
    rule = "offloaded_layers == total_layers and gpu_share_pct == 100"
    cand = judge_rule(rule, {"offloaded_layers": 65.0, "total_layers": 65.0, "gpu_share_pct": 100.0})
    assert cand["outcome"] == "pass" and [a["outcome"] for a in cand["arms"]] == ["pass", "pass"]
    partial = judge_rule(rule, {"offloaded_layers": 65.0, "total_layers": 66.0, "gpu_share_pct": 100.0})
    assert partial["outcome"] == "fail" and partial["arms"][0]["values"] == {"offloaded_layers": 65.0, "total_layers": 66.0}


@pytest.mark.parametrize("text, fragment", [
    ("", "empty rule"),
    ("decode.short >= ", "rule ends where a value was expected"),
    ("decode.short = 5", "'=' is not a comparison"),
    ("1 < 2 < 3", "chained comparisons"),
    ('probe.tools == "PASSED"', "is not a verdict"),
    ('probe.tools > "PASS"', "only be compared with == or !="),
    ("probe.tool == 1", "unknown name 'probe.tool'"),
    ("decode.huge > 1", "prompt class 'huge' is not measured"),
    ("decode.short + 1", "must come out true or false"),
    ('kv_cache_type_k > 3', "cannot compare str with num"),
    ("offloaded_layers and true", "'and' joins true/false values"),
    ("(1 > 2", "missing ')'"),
    ('"open', "unterminated string"),
    ("1 > 2 )", "unexpected ')'"),
    ("12abc > 1", "malformed number"),
    ("decode. > 1", "malformed name"),
    ("a ; b", "unexpected character ';'"),
    ("x" * 3000, "at most 2000"),
])
def test_malformed_rules_give_one_line_errors(text, fragment):
    with pytest.raises(RuleError) as exc:
        check(text)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_runtime_errors_stay_rule_errors():
    with pytest.raises(RuleError, match="division by zero"):
        evaluate(parse("decode.short / 0 > 1"), {"decode.short": 5.0})
    res = judge_rule("decode.short / prefill.short > 1", {"decode.short": 5.0, "prefill.short": 0.0})
    assert res["outcome"] == "error" and "division by zero" in res["error"]
    with pytest.raises(RuleError, match="expected a number"):
        evaluate(parse("decode.short > 1"), {"decode.short": "fast"})


def test_no_rule_is_ever_executed(tmp_path, monkeypatch):
    """Python that would write a file is only text to the rule language."""
    target = tmp_path / "pwned"
    monkeypatch.chdir(tmp_path)
    payloads = [
        f"__import__('os').system('touch {target}')",
        f"open('{target}', 'w').write('x') == 1",
        "().__class__.__bases__[0].__subclasses__()",
        "[x for x in ().__class__.__mro__]",
        "lambda: 1",
        "decode.short >= 50; import os",
        "exec('1')",
        "`id`",
    ]
    for p in payloads:
        with pytest.raises(RuleError):
            check(p)
    assert not target.exists()


def test_the_language_module_calls_no_eval_exec_or_compile():
    tree = ast.parse(Path(inspect.getsourcefile(lang)).read_text())
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & {"eval", "exec", "compile", "__import__", "getattr"}


PIECES = st.sampled_from([
    "(", ")", "and", "or", "not", "==", "!=", "=", "<", "<=", ">", ">=", "+", "-", "*", "/", '"', "'",
    '"PASS"', "'FAIL'", "decode.short", "probe.tools", "probe.tools.passed", "offloaded_layers", "pinned",
    "incumbent.decode.short", "1", "2.5", "1e5", "0", "true", "false", "__import__", ".", ",", "[", "]",
    "{", "}", ";", "lambda", "\\", "\n", " ", "os.system", "`", "#", "ü", "\x00",
])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=30), st.sampled_from(["", " "]))
def test_fuzz_token_soup_is_parsed_or_refused_in_one_line(pieces, sep):
    text = sep.join(pieces)
    try:
        tree = check(text)
    except RuleError as exc:
        assert "\n" not in str(exc)
        return
    # a valid rule evaluates to true, false or undecided, or a RuleError - nothing else
    values = {"decode.short": 50.0, "probe.tools": "PASS", "pinned": False, "probe.tools.passed": 2.0}
    try:
        out = evaluate(tree, values)
    except RuleError:
        return
    assert out is MISSING or isinstance(out, bool)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_arbitrary_text_never_escapes_as_another_exception(text):
    try:
        check(text)
    except RuleError as exc:
        assert "\n" not in str(exc)


@given(st.integers(min_value=1, max_value=5000), st.sampled_from(["(", "not ", "-", "( not "]))
@example(lang.MAX_DEPTH - 1, "(").via("the deepest accepted")
@example(lang.MAX_DEPTH, "(").via("the first refused")
@example(lang.MAX_DEPTH // 2, "( not ").via("two levels a step: the first refused")
@settings(max_examples=40, deadline=None)
def test_deep_nesting_is_refused_not_a_recursion_error(depth, opener):
    """Nesting below the bound is an ordinary rule; at the bound or beyond, one RuleError saying why."""
    text = opener * depth + "1 > 0" + (")" * depth if "(" in opener else "")
    levels = depth * (2 if opener == "( not " else 1)
    if len(text) > lang.MAX_TEXT:
        with pytest.raises(RuleError, match=f"at most {lang.MAX_TEXT}"):
            check(text)
    elif levels >= lang.MAX_DEPTH:
        with pytest.raises(RuleError, match=f"nested more than {lang.MAX_DEPTH} levels deep"):
            check(text)
    else:
        assert arms(check(text)), text  # accepted, and parsed into a rule with an arm


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9),
       st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9))
def test_fuzz_comparisons_agree_with_python(a, b):
    values = {"decode.short": a, "prefill.short": b}
    for op, fn in (("<", a < b), ("<=", a <= b), (">", a > b), (">=", a >= b), ("==", a == b), ("!=", a != b)):
        assert evaluate(parse(f"decode.short {op} prefill.short"), values) is fn
    if b:
        assert math.isclose(evaluate(parse("decode.short / prefill.short"), values), a / b)
