"""``prompt_cache_hit``: prompt tokens came from a cache, so the prefill rate is not a prefill."""

from cardproof.marks import N_
from .base import Canary, Gate, GateOutcome, Said, SampleContext

REPEATED_NONCE = "cafe0000cafe0000"


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    cached = ctx.sample.get("cached_tokens")
    if cached is None:
        return GateOutcome(None, None, Said("no cache counter in the response"))
    src = ctx.response.get("cache_from_log")
    if src:
        text = Said("prompt tokens served from cache: {cached} (server log, task {task}: prompt tokens in all: {total})",
                    {"cached": cached, "task": src.get("task"), "total": src.get("prompt_tokens_total")})
    else:
        text = Said("prompt tokens served from cache: {cached}", {"cached": cached})
    return GateOutcome(cached > threshold, float(cached), text)


def provoke(run) -> None:
    # the same prompt twice with the cache allowed
    cid, _ = run.sample("prompt_cache_hit", extra={"cache_prompt": True}, nonce=REPEATED_NONCE)
    _, t = run.sample("prompt_cache_hit", extra={"cache_prompt": True}, nonce=REPEATED_NONCE, cell_id=cid, rep=2)
    run.plan("prompt_cache_hit", sample_id=t.sample_id, detail={"repeated_nonce": REPEATED_NONCE})


GATE = Gate(
    "prompt_cache_hit",
    N_("prompt tokens were served from a cache"),
    check,
    threshold_unit="tokens",
    order=70,
    canary=Canary(provoke, order=30),
)
