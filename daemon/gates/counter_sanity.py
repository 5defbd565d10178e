"""``counter_sanity``: the server's counters are zero, missing or impossible, so no rate can be read."""

import math

from .base import Canary, Gate, GateOutcome, SampleContext

# Above this a "decode rate" is a division by a near-zero interval, not a speed.
_IMPOSSIBLE_TPS = 1e6


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    s = ctx.sample
    problems = []
    for name in ("decode_tps", "prefill_tps"):
        v = s.get(name)
        if v is None or not math.isfinite(v) or v <= 0 or v > _IMPOSSIBLE_TPS:
            problems.append(f"{name}={v}")
    for name in ("predicted_ms", "prompt_ms"):
        v = s.get(name)
        if v is None or v <= threshold:
            problems.append(f"{name}={v}")
    if (s.get("generated_tokens") or 0) <= 1:
        problems.append(f"generated_tokens={s.get('generated_tokens')} (no decode interval)")
    return GateOutcome(bool(problems), float(len(problems)), "; ".join(problems) or "counters plausible")


def provoke(run) -> None:
    # one token leaves no decode interval to divide by
    _, t = run.sample("counter_sanity", max_tokens=1)
    run.plan("counter_sanity", sample_id=t.sample_id, detail={"max_tokens": 1})


GATE = Gate(
    "counter_sanity",
    "zero, missing or impossible counters",
    check,
    default_threshold=0.01,
    threshold_unit="ms",
    description_de="Zähler null, fehlend oder unmöglich",
    order=80,
    canary=Canary(provoke, order=40),
)
