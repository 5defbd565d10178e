"""``length_limit``: generation stopped on the token limit, so the answer (and its rate) is cut short."""

from cardproof.marks import N_
from .base import Canary, Gate, GateOutcome, Said, SampleContext

_LENGTH = {"length", "limit"}  # OpenAI finish_reason / llama.cpp stop_type / Ollama done_reason


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    reason = ctx.sample.get("stop_reason")
    n = ctx.sample.get("generated_tokens")
    return GateOutcome(reason in _LENGTH, float(n) if n is not None else None,
                       Said("stop reason {reason}, token limit {limit}", {"reason": reason, "limit": ctx.max_tokens}))


def provoke(run) -> None:
    # four tokens, and no end-of-generation token may stop it early
    _, t = run.sample("length_limit", max_tokens=4, extra={"ignore_eos": True})
    run.plan("length_limit", sample_id=t.sample_id, detail={"max_tokens": 4, "ignore_eos": True})


GATE = Gate(
    "length_limit",
    N_("generation stopped on the token limit"),
    check,
    order=20,
    canary=Canary(provoke, order=10),
)
