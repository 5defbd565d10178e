"""Probe verdict logic on recorded exchanges, including the passing arms.

The tiny random-weight models can only fail, so the arms that pass are
tested here on recorded responses, marked as such. Their shape follows:

- OpenAI's chat completion object (platform.openai.com/docs/api-reference/chat/object):
  ``choices[0].message.tool_calls[].function.{name, arguments}`` with
  ``arguments`` a JSON string, ``finish_reason: "tool_calls"``;
- llama.cpp's docs/function-calling.md (github.com/ggml-org/llama.cpp), whose
  example answer carries the flat form ``tool_calls[].{name, arguments}`` and
  ``finish_reason: "tool"``;
- llama-server's tools/server/README.md: with a reasoning format set the
  trace arrives in ``message.reasoning_content``, apart from ``content``.
"""

from __future__ import annotations

import json

import pytest

from cardproof.daemon.backends import OpenAICompatBackend
from cardproof.daemon.probes import PROBES, coding, reasoning, thinking, tools, vision
from cardproof.daemon.probes.base import ProbeContext, Unit, apply_declaration, summarise
from cardproof.daemon.probes.capabilities import from_llama_props, from_ollama_show
from cardproof.daemon.probes.defects import in_language, load_defects
from cardproof.report.i18n import Lang


def answer(content="", reasoning_content=None, tool_calls=None, finish="stop") -> dict:
    msg = {"role": "assistant", "content": content}
    if reasoning_content is not None:
        msg["reasoning_content"] = reasoning_content
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {"choices": [{"index": 0, "finish_reason": finish, "message": msg}], "object": "chat.completion"}


# recorded shape: OpenAI chat completion object with a tool call
OPENAI_CALL = answer(None, tool_calls=[{"id": "call_abc123", "type": "function",
                                        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}],
                     finish="tool_calls")
# recorded shape: llama.cpp docs/function-calling.md (flat tool call, finish_reason "tool")
LLAMACPP_DOC_CALL = answer(None, tool_calls=[{"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}], finish="tool")


def test_tools_recorded_calls_pass_in_both_published_shapes():
    task = tools.TASKS["weather"]
    assert tools.judge_call(task, OPENAI_CALL)[:2] == ("PASS", "call_ok")
    assert tools.judge_call(task, LLAMACPP_DOC_CALL)[:2] == ("PASS", "call_ok")
    assert tools.judge_answer(answer("It is 37 °C with a sandstorm in Oslo."))[:2] == ("PASS", "result_used")


@pytest.mark.parametrize("resp, verdict, arm", [
    (answer("I cannot look up the weather from here."), "FAIL", "no_tool_call"),
    # no call, and the answer states what only the tool could say: an invented result
    (answer("Sunny, about 12 degrees."), "FAIL", "fabricated_result"),
    (answer('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'), "FAIL_BROKEN", "call_as_text"),
    (answer(None, tool_calls=[{"id": "1", "type": "function", "function": {"name": "get_local_time", "arguments": "{}"}}]),
     "FAIL", "wrong_tool"),
    (answer(None, tool_calls=[{"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": "{city: Oslo"}}]),
     "FAIL_BROKEN", "arguments_not_json"),
    (answer(None, tool_calls=[{"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"town\": \"Oslo\"}"}}]),
     "FAIL_BROKEN", "arguments_off_schema"),
    (answer(None, tool_calls=[{"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Bergen\"}"}}]),
     "OK_model_ran_and_was_wrong", "wrong_argument"),
])
def test_tools_failing_arms(resp, verdict, arm):
    assert tools.judge_call(tools.TASKS["weather"], resp)[:2] == (verdict, arm)


def test_tools_currency_schema_checks_number_and_enum():
    task = tools.TASKS["currency"]
    call = lambda args: answer(None, tool_calls=[{"id": "1", "type": "function", "function": {
        "name": "convert_currency", "arguments": json.dumps(args)}}])
    assert tools.judge_call(task, call({"amount": 250, "from_currency": "EUR", "to_currency": "NOK"}))[0] == "PASS"
    assert tools.judge_call(task, call({"amount": "250", "from_currency": "EUR", "to_currency": "NOK"}))[1] == "arguments_off_schema"
    assert tools.judge_call(task, call({"amount": 250, "from_currency": "euro", "to_currency": "NOK"}))[1] == "arguments_off_schema"
    assert tools.judge_answer(answer("It is probably mild."))[:2] == ("OK_model_ran_and_was_wrong", "result_ignored")


def test_thinking_has_no_length_threshold():
    """The seeds' 32-character trace is correct and separate: it passes here (a 40-character gate failed it)."""
    trace = "41 * 32 = 1312 1312 - 100 = 1212"
    assert len(trace) == 32
    verdict, arm, detail = thinking.judge(answer("1212", reasoning_content=trace))
    assert (verdict, arm) == ("PASS", "separate_channel")
    assert detail["trace_chars"] == 32 and detail["answer_correct"]
    # the answer repeating its working is recorded, not graded
    assert thinking.judge(answer("41*32=1312, minus 100 is 1212", reasoning_content=trace))[0] == "PASS"


@pytest.mark.parametrize("resp, verdict, arm", [
    (answer("<think>41*32=1312</think>1212"), "FAIL_BROKEN", "trace_in_content"),
    (answer("1212"), "FAIL", "no_trace"),
    (answer("", reasoning_content="41 * 32 = 1312, then", finish="length"), "INCONCLUSIVE", "budget_spent_in_trace"),
    (answer(""), "FAIL", "empty"),
])
def test_thinking_failing_arms(resp, verdict, arm):
    assert thinking.judge(resp)[:2] == (verdict, arm)


def test_reasoning_answers_and_recall():
    asked = reasoning.TASKS["bat_ball"]["asked"]
    marked = reasoning.judge(answer("so it is 15 cents\nANSWER: 15"), [15, 0.15], None, asked)[2]
    assert (marked["answer"], marked["read_from"], marked["format_followed"]) == (15.0, "answer_line", True)
    dollars = reasoning.judge(answer("the ball costs 0.15 dollars"), [15, 0.15], None, asked)
    assert dollars[:2] == ("PASS", "correct") and (dollars[2]["answer"], dollars[2]["format_followed"]) == (15.0, False)
    assert reasoning.judge(answer("ANSWER: 15"), [15, 0.15])[:2] == ("PASS", "correct")
    assert reasoning.judge(answer("ANSWER: 5"), [15], [5])[:2] == ("OK_model_ran_and_was_wrong", "recalled_famous_answer")
    assert reasoning.judge(answer("ANSWER: 30"), [15], [5])[:2] == ("OK_model_ran_and_was_wrong", "wrong_answer")
    assert reasoning.judge(answer("hmm", finish="length"), [15])[:2] == ("FAIL", "no_answer_within_max_tokens")


def test_reasoning_marks_a_memorised_well_known_form():
    known = Unit("bat_ball/known", "PASS", "correct")
    changed = Unit("bat_ball/changed", "OK_model_ran_and_was_wrong", "recalled_famous_answer")
    reasoning.pair("bat_ball", known, changed)
    assert (known.verdict, known.arm) == ("INCONCLUSIVE", "memorised_suspect")


def test_coding_runs_recorded_code_in_a_subprocess():
    good = "```python\ndef roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n" \
           "    total = 0\n    for a, b in zip(s, s[1:] + ' '):\n        x = v[a]\n" \
           "        total += -x if b != ' ' and v[b] > x else x\n    return total\n```"
    assert coding.judge(answer(good), "roman_to_int")[:2] == ("PASS", "all_tests_passed")
    wrong = "```python\ndef roman_to_int(s):\n    return len(s)\n```"
    verdict, arm, detail, _ = coding.judge(answer(wrong), "roman_to_int")
    assert (verdict, arm) == ("OK_model_ran_and_was_wrong", "tests_failed") and detail["result"]["passed"] < 6
    assert coding.judge(answer("```python\ndef roman_to_int(s:\n```"), "roman_to_int")[1] == "does_not_compile"
    loop = "```python\ndef roman_to_int(s):\n    while True:\n        pass\n```"
    assert coding.judge(answer(loop), "roman_to_int", timeout_s=1.5)[:2] == ("FAIL", "time_limit")
    net = "```python\nimport socket\ndef roman_to_int(s):\n    socket.create_connection(('192.0.2.1', 80))\n```"
    verdict, _, detail, _ = coding.judge(answer(net), "roman_to_int")
    assert verdict == "OK_model_ran_and_was_wrong" and "not allowed" in json.dumps(detail["result"])
    assert coding.judge(answer("I would rather not."), "roman_to_int")[:2] == ("FAIL", "no_code")


def test_coding_code_cut_by_the_token_limit_is_not_called_broken():
    """A real SmolLM2 reply looped in a dict literal until max_tokens: the code is unfinished, not bad syntax."""
    cut = "```python\ndef roman_to_int(s: str) -> int:\n    roman_map = {\n        \"M\": 1000,\n        \"CM"
    assert coding.judge(answer(cut, finish="length"), "roman_to_int")[:2] == ("FAIL", "cut_at_max_tokens")
    # the same text ending on the model's own stop is broken code
    assert coding.judge(answer(cut), "roman_to_int")[:2] == ("FAIL_BROKEN", "does_not_compile")
    assert coding.judge(answer("```python\ndef sum_list(numbers):\n    return sum(numbers)\n```"),
                        "sum_list")[:2] == ("PASS", "all_tests_passed")


def test_vision_png_is_valid_and_judged():
    data = vision.png((220, 20, 20), size=4)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IEND" in data
    assert vision.judge(answer("Red."), "red")[:2] == ("PASS", "colour_named")
    assert vision.judge(answer("Blue"), "red")[:2] == ("OK_model_ran_and_was_wrong", "wrong_colour")


def test_declared_vs_delivered():
    assert apply_declaration(Unit("x", "FAIL", "no_tool_call"), True).verdict == "DECLARED_NOT_DELIVERED"
    u = apply_declaration(Unit("x", "FAIL", "no_tool_call"), False)
    assert (u.verdict, u.raw_verdict) == ("NOT_CAPABLE", "FAIL")
    assert apply_declaration(Unit("x", "FAIL", "no_tool_call"), None).verdict == "FAIL"
    assert apply_declaration(Unit("x", "PASS", "call_ok"), False).verdict == "PASS"
    assert apply_declaration(Unit("x", "ERROR", "request_failed:timeout"), True).verdict == "ERROR"


def test_summary_flags_unstable_and_keeps_the_score():
    row = lambda v, verdict, attempt, sha="s": {"variant": v, "verdict": verdict, "arm": "a", "graded": 1,
                                               "attempt": attempt, "request_sha256": sha, "duration_ms": 1.0}
    stable = summarise([row("t1", "PASS", 1), row("t2", "FAIL", 1), row("t3", "PASS", 1)])
    assert (stable["verdict"], stable["passed"], stable["total"]) == ("FAIL", 2, 3)
    unstable = summarise([row("t1", "PASS", 1), row("t1", "FAIL", 2)])
    assert unstable["verdict"] == "INCONCLUSIVE" and unstable["unstable"] == ["t1"]
    assert "does not grade the model" in unstable["arm"]
    # different input is not "identical input": no instability
    assert summarise([row("t1", "PASS", 1, "a"), row("t1", "FAIL", 2, "b")])["unstable"] == []
    assert summarise([row("t1", "PASS", 1)] + [dict(row("k", "FAIL", 1), graded=0)])["verdict"] == "PASS"


def test_capabilities_from_recorded_props_and_show():
    # recorded from this build's /props for a tiny model (trimmed), and one with a tool template
    tiny = {"modalities": {"vision": False, "audio": False},
            "chat_template": "{%- if enable_thinking is defined and enable_thinking is false %}...{%- endif %}",
            "chat_template_caps": {"supports_tools": False, "supports_tool_calls": False}}
    caps = from_llama_props(tiny)["declared"]
    assert caps == {"tools": False, "thinking": True, "vision": False}
    assert from_llama_props({"chat_template": "{% if tools %}...{% endif %}", "modalities": {"vision": True}})[
        "declared"] == {"tools": True, "thinking": False, "vision": True}
    assert from_llama_props({})["declared"] == {"tools": None, "thinking": None, "vision": None}
    # Ollama's /api/show capabilities list (the seeds' candidate: no vision)
    show = from_ollama_show({"capabilities": ["completion", "tools", "thinking"]})["declared"]
    assert show == {"tools": True, "thinking": True, "vision": False}


class RecordedBackend(OpenAICompatBackend):
    """Answers probe requests from recorded responses; counts what was asked (nothing is sent)."""

    kind = "llama-server"

    def __init__(self, replies):
        super().__init__("http://127.0.0.1:9")
        self.replies = replies
        self.bodies = []

    def chat_raw(self, model, body):
        self.bodies.append(body)
        return self.replies(body, len(self.bodies))

    def server_info(self, model=None):
        return {}


def test_tools_probe_two_turns_on_a_recorded_exchange():
    def replies(body, n):
        last = body["messages"][-1]
        if last["role"] == "tool":
            assert json.loads(last["content"]) == tools.WEATHER_RESULT
            return answer("Oslo: 37 °C, sandstorm.")
        name = {"get_weather": ("get_weather", {"city": "Oslo"}), "convert_currency": (
            "convert_currency", {"amount": 250, "from_currency": "EUR", "to_currency": "NOK"})}
        wanted = "get_local_time" if len(body["tools"]) == 2 else body["tools"][0]["function"]["name"]
        fn, args = name.get(wanted, (wanted, {"city": "Tokyo"}))
        return answer(None, tool_calls=[{"id": f"call_{n}", "type": "function",
                                         "function": {"name": fn, "arguments": json.dumps(args)}}], finish="tool_calls")

    backend = RecordedBackend(replies)
    units = tools.run(ProbeContext(backend, "m", {"tools": True}))
    assert [(u.variant, u.verdict, u.arm) for u in units] == [
        ("weather", "PASS", "result_used"), ("currency", "PASS", "call_ok"), ("pick_tool", "PASS", "call_ok")]
    assert len(backend.bodies) == 4 and all(b["temperature"] == 0 and b["cache_prompt"] is False for b in backend.bodies)


def test_every_probe_has_an_entry_in_the_defects_register():
    register = load_defects()
    assert set(PROBES) <= set(register)
    assert all(d["defect"] and d["since"] and d["effect"] for ds in register.values() for d in ds)


def _run_rows(tmp_path):
    from cardproof.daemon.store import open_store

    store = open_store(tmp_path / "u.db")
    cid = store.insert("campaigns", {"name": "u", "sha256": "0" * 64, "toml_text": "", "registered_at": "2026-01-01"})
    run_id = store.insert("runs", {"campaign_id": cid, "status": "running", "started_at": "2026-01-01"})
    model_id = store.insert("models", {"name": "incumbent", "digest": "d"})
    return store, run_id, model_id


def test_a_probe_that_grades_the_same_model_two_ways_is_unstable(tmp_path):
    """The seeds' thinking probe: PASS once, FAIL once on identical input -> no verdict on the model."""
    from types import SimpleNamespace

    from cardproof.daemon.campaign.model import ProbeSettings
    from cardproof.daemon.run.probes import run_model_probes

    store, run_id, model_id = _run_rows(tmp_path)

    class Flaky(RecordedBackend):
        def server_info(self, model=None):
            return {"chat_template": "{% if enable_thinking %}{% endif %}", "modalities": {"vision": False}}

    backend = Flaky(lambda body, n: answer("1212", reasoning_content="41*32=1312, -100 = 1212" if n == 1 else ""))
    campaign = SimpleNamespace(probes=ProbeSettings(run=("thinking",), repeat=2))
    out = run_model_probes(store, backend, campaign, run_id, "incumbent", model_id, echo=lambda s: None)
    assert out["thinking"]["verdict"] == "INCONCLUSIVE" and out["thinking"]["unstable"] == ["arithmetic"]
    rows = list(store.db.query("select verdict, attempt, request_sha256 from probe_results order by id"))
    assert [r["verdict"] for r in rows] == ["PASS", "DECLARED_NOT_DELIVERED"]
    assert rows[0]["request_sha256"] == rows[1]["request_sha256"]


def test_a_probe_bug_is_an_error_with_its_traceback_not_a_lost_run(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from cardproof.daemon.campaign.model import ProbeSettings
    from cardproof.daemon.probes import PROBES
    from cardproof.daemon.probes.base import Probe
    from cardproof.daemon.run.probes import run_model_probes

    store, run_id, model_id = _run_rows(tmp_path)

    def broken(ctx):
        return {}["no such key"]

    monkeypatch.setitem(PROBES, "coding", Probe("coding", None, "broken", broken))
    backend = RecordedBackend(lambda body, n: answer("x"))
    out = run_model_probes(store, backend, SimpleNamespace(probes=ProbeSettings(run=("coding",), repeat=1)),
                           run_id, "m", model_id, echo=lambda s: None)
    assert out["coding"]["verdict"] == "ERROR" and out["coding"]["arm"] == "probe_raised:KeyError"
    row = store.db.execute("select exchange_json from probe_results").fetchone()[0]
    assert "KeyError" in json.loads(row)["error"]


def test_the_coding_defect_counts_come_from_the_probes_own_tasks(monkeypatch):
    """The note said "three small functions with five or six tests each" of a probe with four tasks of four
    to six tests; the counts are now the definition's, in both languages, and follow it when it changes."""
    first = load_defects()["coding"][0]
    assert first["defect"] == "Four small functions with four to six tests each."
    de = Lang("de").gettext
    assert in_language(first, "defect", de) == "Vier kleine Funktionen mit je vier bis sechs Tests."
    assert first["effect"].startswith("4/4 against 3/4 ") and in_language(first, "effect", de).startswith("4/4 gegenüber 3/4 ")
    assert load_defects()["reasoning"][0]["defect"].startswith("Three public puzzles.")
    bigger = dict(coding.TASKS) | {"extra": {"prompt": "x", "tests": [[[1], 1]] * 7, "reference": "def extra(x):\n    return x\n"}}
    monkeypatch.setattr(coding, "TASKS", bigger)
    grown = load_defects()["coding"][0]
    assert grown["defect"] == "Five small functions with four to seven tests each."
    assert in_language(grown, "defect", de) == "Fünf kleine Funktionen mit je vier bis sieben Tests."
    assert grown["effect"].startswith("5/5 against 4/5 ")


def test_a_count_the_probe_does_not_give_is_refused_naming_the_entry(tmp_path):
    from cardproof.daemon.probes.defects import DefectsError

    bad = tmp_path / "defects.toml"
    bad.write_text('[[coding]]\ndefect = "{Tasks} functions, {widgets} widgets"\nsince = "0.1"\neffect = "y"\n')
    with pytest.raises(DefectsError, match=r"defects\.toml: coding\[0\]\.defect: the probe's definition gives no \{widgets\}"):
        load_defects(bad)
