from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    cached = ctx.sample.get("cached_tokens")
    if cached is None:
        return GateOutcome(None, None, "no cache counter in the response")
    text = f"{cached} prompt tokens served from cache"
    src = ctx.response.get("cache_from_log")
    if src:
        text += f" (server log, task {src['task']}: {src['prompt_tokens_total']} prompt tokens in all)"
    return GateOutcome(cached > threshold, float(cached), text)


GATE = Gate("prompt_cache_hit", "prompt tokens were served from a cache", check, threshold_unit="tokens")
