"""``counter_sanity``: the server's counters are zero, missing or impossible, so no rate can be read."""

import math

from cardproof.marks import N_
from .base import Canary, Gate, GateOutcome, Said, SampleContext

# Above this a "decode rate" is a division by a near-zero interval, not a speed.
_IMPOSSIBLE_TPS = 1e6


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    s = ctx.sample
    problems: list[Said] = []
    for name in ("decode_tps", "prefill_tps"):
        v = s.get(name)
        if v is None or not math.isfinite(v) or v <= 0 or v > _IMPOSSIBLE_TPS:
            problems.append(_value(name, v))
    for name in ("predicted_ms", "prompt_ms"):
        v = s.get(name)
        if v is None or v <= threshold:
            problems.append(_value(name, v))
    if (s.get("generated_tokens") or 0) <= 1:
        problems.append(Said("{field} = {value} (no decode interval)",
                             {"field": "generated_tokens", "value": s.get("generated_tokens")}))
    return GateOutcome(bool(problems), float(len(problems)), problems or Said("counters plausible"))


def _value(name: str, value) -> Said:
    """One implausible counter: the column's name (code) and its value (a dash where missing)."""
    if value is None:
        return Said("{field} missing", {"field": name})
    return Said("{field} = {value}", {"field": name, "value": value})


def provoke(run) -> None:
    # one token leaves no decode interval to divide by
    _, t = run.sample("counter_sanity", max_tokens=1)
    run.plan("counter_sanity", sample_id=t.sample_id, detail={"max_tokens": 1})


GATE = Gate(
    "counter_sanity",
    N_("zero, missing or impossible counters"),
    check,
    default_threshold=0.01,
    threshold_unit="ms",
    order=80,
    canary=Canary(provoke, order=40),
)
