"""What a probe is, what it answers, and how its answers add up.

A probe asks a model something with a checkable answer and returns one Unit
per task variant: a verdict (one of ``VERDICTS`` below), the *arm* (the branch
of the probe's own logic that decided it, so a reader can see why), the
duration, and the raw exchange as evidence.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable

from ..backends import BackendError

VERDICTS = (
    "PASS", "FAIL", "FAIL_BROKEN", "ERROR", "INCONCLUSIVE", "SKIP",
    "DECLARED_NOT_DELIVERED", "OK_model_ran_and_was_wrong", "NOT_CAPABLE",
)
# verdicts that say the model did not deliver; a declaration turns them into
# DECLARED_NOT_DELIVERED, an absent declaration into NOT_CAPABLE
FAILING = frozenset({"FAIL", "FAIL_BROKEN", "OK_model_ran_and_was_wrong"})
# a probe summary names the first of these that any of its tasks has
SEVERITY = (
    "NOT_CAPABLE", "DECLARED_NOT_DELIVERED", "FAIL_BROKEN", "FAIL", "OK_model_ran_and_was_wrong",
    "INCONCLUSIVE", "ERROR", "SKIP",
)
UNSTABLE_ARM = "unstable: different verdicts on identical input; does not grade the model"


@dataclass
class Unit:
    """One task variant, asked once."""

    variant: str
    verdict: str
    arm: str
    duration_ms: float | None = None
    exchange: dict = field(default_factory=dict)
    graded: bool = True  # False: shown as a detector (e.g. a well-known puzzle), not scored
    detail: dict = field(default_factory=dict)
    raw_verdict: str | None = None  # before the declaration was applied
    declared: bool | None = None


@dataclass
class ProbeContext:
    """What a probe may use: the backend, the model, its declared capabilities, the limits."""

    backend: object
    model: str
    declared: dict  # capability -> True / False / None (unknown)
    max_tokens: int = 1024
    reasoning: bool = False
    code_timeout_s: float = 10.0
    seed: int = 1234

    def ask(self, body: dict, *, reasoning: bool | None = None) -> tuple[dict | None, float, BackendError | None]:
        """One non-streamed request with fixed sampling: (response, ms, error).

        Temperature 0, a fixed seed and no prompt cache, so that a repeat is
        identical input and a changed verdict says something about the
        server or the model, not about chance.
        """
        full = {
            "temperature": 0,
            "seed": self.seed,
            "cache_prompt": False,
            "max_tokens": self.max_tokens,
            "chat_template_kwargs": {"enable_thinking": self.reasoning if reasoning is None else reasoning},
        } | body
        t0 = time.perf_counter()
        try:
            resp = self.backend.chat_raw(self.model, full)
        except BackendError as exc:
            return None, (time.perf_counter() - t0) * 1000.0, exc
        return resp, (time.perf_counter() - t0) * 1000.0, None


@dataclass(frozen=True)
class Probe:
    name: str
    capability: str | None  # tools / thinking / vision; None: every chat model is asked
    description: str
    run: Callable[[ProbeContext], list[Unit]]
    order: int = 1000  # where it runs among the campaign's default probes (and is listed)
    # the form the probe asks its answers in, as the article names it (German in the report's .po);
    # each answer's detail then says whether it had it (``format_followed``)
    asked_format: str | None = None
    # lang -> the counts its known defects quote, from its own definition (daemon/probes/defects.py)
    # the counts the defects register quotes, as words of the language of the gettext it is given
    facts: Callable[[Callable[[str], str]], dict[str, str]] | None = None


def request_sha256(body: dict) -> str:
    """Hash of a request body: two attempts are "identical input" when these match."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def message(resp: dict | None) -> dict:
    """content / reasoning / tool_calls / finish_reason of the first choice, '' where absent."""
    choice = ((resp or {}).get("choices") or [{}])[0] or {}
    msg = choice.get("message") or {}
    return {
        "content": msg.get("content") or "",
        "reasoning": msg.get("reasoning_content") or "",
        "tool_calls": msg.get("tool_calls") or [],
        "finish_reason": choice.get("finish_reason"),
        "raw": msg,
    }


def failed_request(variant: str, exc: BackendError, ms: float, exchange: dict) -> Unit:
    """A request that got no answer: the server refusing (4xx) is the model's set-up, not our failure.

    A 4xx means the server would not take the request for this model (an image
    to a text-only model, tools without a tool template): FAIL, which a
    declaration then turns into DECLARED_NOT_DELIVERED or NOT_CAPABLE.
    Anything else (connection, timeout, 5xx) is ERROR: an exception, not a
    verdict on the model (principle 4). ``detail`` names what could not be
    read and what was there (:func:`error_detail`).
    """
    exchange = exchange | {"error": str(exc)}
    if exc.kind == "http" and exc.status and 400 <= exc.status < 500:
        return Unit(variant, "FAIL", f"http_{exc.status}", ms, exchange)
    return Unit(variant, "ERROR", f"request_failed:{exc.kind}", ms, exchange, detail=error_detail(exc))


def error_detail(exc: BaseException) -> dict:
    """The field and value behind an error verdict: for a request, the part of the answer that could not be
    read (``field``: ``body`` for an answer that is no JSON, such as one cut off, or the JSON field) with
    what it held; for a probe's own exception its type and message."""
    if isinstance(exc, BackendError):
        out = {"kind": exc.kind, "status": exc.status, "field": exc.where, **exc.detail}
        if exc.where is None and "value" not in out:
            out["value"] = exc.text[:300]
    else:
        out = {"kind": "exception", "field": type(exc).__name__, "value": str(exc)[:300]}
    return {k: v for k, v in out.items() if v is not None}


def apply_declaration(unit: Unit, declared: bool | None) -> Unit:
    """Declared vs delivered: a failing unit of a declared capability is DECLARED_NOT_DELIVERED,
    of a capability never declared NOT_CAPABLE (not counted against the model)."""
    unit.declared = declared
    unit.raw_verdict = unit.verdict
    if unit.verdict in FAILING and declared is not None:
        unit.verdict = "DECLARED_NOT_DELIVERED" if declared else "NOT_CAPABLE"
    return unit


def summarise(rows: list[dict]) -> dict:
    """One probe's result for one model from its stored rows (any number of attempts).

    A variant whose attempts disagree on identical input is unstable, and an
    unstable probe gets INCONCLUSIVE: it does not grade the model. Otherwise
    all graded variants PASS -> PASS, else the most severe verdict among them,
    with the arm of the first variant that has it. ``passed``/``total`` count
    graded variants; ``tasks`` gives each graded variant's own verdict and arm,
    since the summary's arm is only that of the worst one.
    """
    graded = [r for r in rows if r.get("graded", 1)]
    by_variant: dict[str, list[dict]] = {}
    for r in graded:
        by_variant.setdefault(r["variant"], []).append(r)
    unstable = []
    final: dict[str, tuple[str, str]] = {}
    for variant, attempts in by_variant.items():
        seen = {}
        for a in attempts:
            seen.setdefault(a.get("request_sha256"), set()).add(a["verdict"])
        if any(len(v) > 1 for v in seen.values()):
            unstable.append(variant)
            final[variant] = ("INCONCLUSIVE", UNSTABLE_ARM)
        else:
            final[variant] = (attempts[0]["verdict"], attempts[0]["arm"])
    attempts_n = max((len(a) for a in by_variant.values()), default=0)
    passed = sum(1 for v, _ in final.values() if v == "PASS")
    out = {"passed": passed, "total": len(final), "unstable": unstable, "attempts": attempts_n,
           "duration_ms": sum(r.get("duration_ms") or 0 for r in rows),
           "tasks": [{"variant": v, "verdict": verdict, "arm": arm} for v, (verdict, arm) in final.items()]}
    if not final:
        return out | {"verdict": "SKIP", "arm": "no graded task"}
    if unstable:
        return out | {"verdict": "INCONCLUSIVE", "arm": UNSTABLE_ARM}
    if passed == len(final):
        return out | {"verdict": "PASS", "arm": "all tasks passed"}
    for verdict in SEVERITY:
        for v, arm in final.values():
            if v == verdict:
                return out | {"verdict": verdict, "arm": arm}
    return out | {"verdict": "INCONCLUSIVE", "arm": "no verdict"}
