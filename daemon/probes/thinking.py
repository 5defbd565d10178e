"""thinking: a reasoning channel exists and is separate from the answer.

Asked with thinking switched on, the model must return a non-empty
``reasoning_content`` *and* a non-empty answer. There is no length
threshold: a 40-character minimum once failed a correct 32-character trace
("41 * 32 = 1312 1312 - 100 = 1212") and so graded verbosity, not thinking.
Trace length and whether the answer is right are recorded, never graded
here; right answers are the reasoning probe's business. Whether the answer
repeats the trace is not graded either: a short answer that carries its own
working cannot be told apart from a channel that was never split.

Arms: ``separate_channel`` (PASS), ``budget_spent_in_trace`` (the token limit
ended the trace before any answer: INCONCLUSIVE, a limit of the probe),
``trace_in_content`` (think tags left in the answer: the server did not
split the channel, FAIL_BROKEN), ``no_trace`` and ``empty`` (FAIL).
"""

from __future__ import annotations

import re

from ..backends import BackendError
from .base import Probe, ProbeContext, Unit, failed_request, message

PROMPT = "Compute 41 * 32 - 100. Work it out, then give the final answer as a number."
EXPECTED = "1212"
_TAGS = re.compile(r"</?think>")


def judge(resp: dict, reasoning_format: str | None = None) -> tuple[str, str, dict]:
    """Verdict, arm and detail for one answer (pure: tested with recorded responses)."""
    msg = message(resp)
    trace, answer = msg["reasoning"], msg["content"]
    detail = {"trace_chars": len(trace), "answer_chars": len(answer),
              "answer_correct": EXPECTED in answer.replace(",", ""), "finish_reason": msg["finish_reason"]}
    if reasoning_format:
        detail["server_reasoning_format"] = reasoning_format
    if trace.strip() and answer.strip():
        return "PASS", "separate_channel", detail
    if trace.strip() and msg["finish_reason"] == "length":
        return "INCONCLUSIVE", "budget_spent_in_trace", detail
    if _TAGS.search(answer):
        return "FAIL_BROKEN", "trace_in_content", detail
    if answer.strip() or trace.strip():
        return "FAIL", "no_trace" if answer.strip() else "no_answer_after_trace", detail
    return "FAIL", "empty", detail


def run(ctx: ProbeContext) -> list[Unit]:
    body = {"messages": [{"role": "user", "content": PROMPT}]}
    resp, ms, err = ctx.ask(body, reasoning=True)
    exchange = {"requests": [body | {"chat_template_kwargs": {"enable_thinking": True}}], "responses": [resp]}
    if err:
        return [failed_request("arithmetic", err, ms, exchange)]
    fmt = None
    try:
        params = (ctx.backend.server_info(ctx.model).get("default_generation_settings") or {}).get("params") or {}
        fmt = params.get("reasoning_format")
    except BackendError:  # the format is context for the reader, never a reason to fail the probe
        fmt = None
    verdict, arm, detail = judge(resp, fmt)
    return [Unit("arithmetic", verdict, arm, ms, exchange, detail=detail)]


PROBE = Probe("thinking", "thinking", "a reasoning channel that is separate from the answer", run, order=20)
