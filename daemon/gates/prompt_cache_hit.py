from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    cached = ctx.sample.get("cached_tokens")
    if cached is None:
        return GateOutcome(None, None, "no cache counter in the response")
    return GateOutcome(cached > threshold, float(cached), f"{cached} prompt tokens served from cache")


GATE = Gate("prompt_cache_hit", "prompt tokens were served from a cache", check, threshold_unit="tokens")
