"""tools: the model must emit a well-formed call for a given schema, and use the result.

Three tasks, each decided at the first arm that fails:

- ``weather``: call ``get_weather(city)``, then answer from the tool's result.
  The result is implausible on purpose (37 °C and a sandstorm in Oslo) so
  an answer from general knowledge cannot pass for one from the tool.
- ``currency``: a number and an enum argument, checked against the schema.
- ``pick_tool``: two tools offered, the question fits only one.

Arms: ``no_tool_call`` (FAIL), ``fabricated_result`` (no call, and the answer
states what only the tool could have said: a temperature, an exchange rate, a
clock time; FAIL, and the article names it in one line), ``call_as_text`` (the
model wrote a call into the text that the server did not parse: FAIL_BROKEN),
``wrong_tool`` (FAIL),
``arguments_not_json`` / ``arguments_off_schema`` (FAIL_BROKEN),
``wrong_argument`` and ``result_ignored`` (OK_model_ran_and_was_wrong),
``no_final_answer`` (FAIL), ``result_used`` / ``call_ok`` (PASS).
"""

from __future__ import annotations

import json
import re

from .base import Probe, ProbeContext, Unit, failed_request, message

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_local_time", "description": "Current local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CONVERT = {"type": "function", "function": {
    "name": "convert_currency", "description": "Convert an amount of money between currencies.",
    "parameters": {"type": "object", "properties": {
        "amount": {"type": "number"},
        "from_currency": {"type": "string", "enum": ["EUR", "USD", "NOK", "JPY"]},
        "to_currency": {"type": "string", "enum": ["EUR", "USD", "NOK", "JPY"]}},
        "required": ["amount", "from_currency", "to_currency"]}}}

WEATHER_RESULT = {"city": "Oslo", "temperature_c": 37, "condition": "sandstorm"}

# What only the tool could have told: an answer without a call that states it invented it.
_WEATHER_FACT = re.compile(r"-?\d+(?:[.,]\d+)?\s*(?:°|degrees?\b)|\b(?:sunny|cloudy|overcast|rain(?:y|ing)?|snow(?:y|ing)?"
                           r"|breeze|windy|foggy|clear skies|humidity)\b", re.IGNORECASE)
_RATE_FACT = re.compile(r"\b(?!250\b)\d+(?:[.,]\d+)?\s*(?:norwegian\s+)?(?:NOK|kroner|krone|kr)\b|\b(?:multiply|divide)\s+250\s+by\s+\d"
                        r"|\brate\s+(?:of|is)\s+\d", re.IGNORECASE)
_TIME_FACT = re.compile(r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s*(?:a\.?m\.?|p\.?m\.?)(?!\w)", re.IGNORECASE)

TASKS = {
    "weather": {"tools": [WEATHER], "prompt": "What is the weather in Oslo right now? Use the get_weather tool.",
                "tool": "get_weather", "args": {"city": "oslo"}, "use_result": True, "invented": _WEATHER_FACT},
    "currency": {"tools": [CONVERT], "prompt": "How much is 250 euros in Norwegian kroner? Use the conversion tool.",
                 "tool": "convert_currency", "args": {"amount": 250, "from_currency": "EUR", "to_currency": "NOK"},
                 "use_result": False, "invented": _RATE_FACT},
    "pick_tool": {"tools": [WEATHER, TIME], "prompt": "What time is it in Tokyo at the moment? Use a tool.",
                  "tool": "get_local_time", "args": {"city": "tokyo"}, "use_result": False, "invented": _TIME_FACT},
}

_CALL_IN_TEXT = re.compile(r"<tool_call>|\"name\"\s*:\s*\"(get_weather|get_local_time|convert_currency)\"|"
                           r"\b(get_weather|get_local_time|convert_currency)\s*\(")


def _call_parts(call: dict) -> tuple[str | None, object, str | None]:
    """name, arguments, id of a tool call: nested OpenAI form or the flat form some servers send."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    return fn.get("name"), fn.get("arguments"), call.get("id")


def _schema_problem(args: dict, tool: dict) -> str | None:
    params = tool["function"]["parameters"]
    for key in params.get("required", []):
        if key not in args:
            return f"missing required argument {key!r}"
    for key, value in args.items():
        spec = params["properties"].get(key)
        if spec is None:
            return f"argument {key!r} is not in the schema"
        if spec["type"] == "string" and not isinstance(value, str):
            return f"argument {key!r} should be a string, got {value!r}"
        if spec["type"] == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"argument {key!r} should be a number, got {value!r}"
        if "enum" in spec and value not in spec["enum"]:
            return f"argument {key!r} is {value!r}, not one of {spec['enum']}"
    return None


def _matches(args: dict, expected: dict) -> bool:
    for key, want in expected.items():
        got = args.get(key)
        if isinstance(want, str) and want.islower():
            if not isinstance(got, str) or got.strip().lower() != want:
                return False
        elif got != want:
            return False
    return True


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence (or line) holding ``text[start:end]``, as the evidence for an invented result."""
    begin = max(text.rfind(". ", 0, start) + 2 if text.rfind(". ", 0, start) >= 0 else 0, text.rfind("\n", 0, start) + 1)
    stops = [i for i in (text.find(". ", end), text.find("\n", end)) if i >= 0]
    return " ".join(text[begin:min(stops) + 1 if stops else len(text)].split())[:300]


def judge_call(task: dict, resp: dict) -> tuple[str, str, dict]:
    """Verdict, arm and detail for the first turn of a task (pure: tested with recorded responses)."""
    msg = message(resp)
    calls = msg["tool_calls"]
    if not calls:
        text = msg["content"]
        if _CALL_IN_TEXT.search(text):
            return "FAIL_BROKEN", "call_as_text", {"content_head": text[:200]}
        invented = task["invented"].search(text)
        if invented:
            return "FAIL", "fabricated_result", {"finish_reason": msg["finish_reason"],
                                                 "fabricated": _sentence_around(text, invented.start(), invented.end())}
        return "FAIL", "no_tool_call", {"finish_reason": msg["finish_reason"]}
    name, raw_args, call_id = _call_parts(calls[0])
    tool = next((t for t in task["tools"] if t["function"]["name"] == name), None)
    if name != task["tool"]:
        return "FAIL", "wrong_tool", {"called": name}
    if isinstance(raw_args, str):
        try:
            args = json.loads(raw_args)
        except ValueError:
            return "FAIL_BROKEN", "arguments_not_json", {"arguments": raw_args[:200]}
    else:
        args = raw_args
    if not isinstance(args, dict):
        return "FAIL_BROKEN", "arguments_not_json", {"arguments": repr(raw_args)[:200]}
    problem = _schema_problem(args, tool)
    if problem:
        return "FAIL_BROKEN", "arguments_off_schema", {"problem": problem, "arguments": args}
    if not _matches(args, task["args"]):
        return "OK_model_ran_and_was_wrong", "wrong_argument", {"arguments": args, "expected": task["args"]}
    return "PASS", "call_ok", {"arguments": args, "call_id": call_id, "calls": len(calls)}


def judge_answer(resp: dict) -> tuple[str, str, dict]:
    """The second turn of ``weather``: the answer must carry the tool's (implausible) result."""
    msg = message(resp)
    text = msg["content"]
    if msg["tool_calls"] or not text.strip():
        return "FAIL", "no_final_answer", {"tool_calls": len(msg["tool_calls"]), "finish_reason": msg["finish_reason"]}
    if re.search(r"(?<!\d)37(?!\d)", text) or "sandstorm" in text.lower():
        return "PASS", "result_used", {}
    return "OK_model_ran_and_was_wrong", "result_ignored", {"answer_head": text[:200]}


def run(ctx: ProbeContext) -> list[Unit]:
    units = []
    for variant, task in TASKS.items():
        body = {"messages": [{"role": "user", "content": task["prompt"]}], "tools": task["tools"],
                "tool_choice": "auto"}
        resp, ms, err = ctx.ask(body)
        exchange = {"requests": [body], "responses": [resp]}
        if err:
            units.append(failed_request(variant, err, ms, exchange))
            continue
        verdict, arm, detail = judge_call(task, resp)
        if verdict == "PASS" and task["use_result"]:
            call = message(resp)["tool_calls"][0]
            name, raw_args, call_id = _call_parts(call)
            call_id = call_id or "call_0"
            follow = {"messages": body["messages"] + [
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": name, "arguments": raw_args if isinstance(raw_args, str) else json.dumps(raw_args)}}]},
                {"role": "tool", "tool_call_id": call_id, "content": json.dumps(WEATHER_RESULT)},
            ], "tools": task["tools"]}
            resp2, ms2, err2 = ctx.ask(follow)
            exchange["requests"].append(follow)
            exchange["responses"].append(resp2)
            ms += ms2
            if err2:
                units.append(failed_request(variant, err2, ms, exchange))
                continue
            verdict, arm, detail2 = judge_answer(resp2)
            detail |= detail2
        units.append(Unit(variant, verdict, arm, ms, exchange, detail=detail))
    return units


def facts(say) -> dict[str, str]:
    """The counts the defects register quotes, from :data:`TASKS` itself."""
    from .defects import number_words

    return {"tasks": number_words(len(TASKS), say)}


PROBE = Probe("tools", "tools", "well-formed tool calls for a given schema, and the result used", run, order=10,
              facts=facts)
