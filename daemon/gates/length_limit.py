from .base import Gate, GateOutcome, SampleContext

_LENGTH = {"length", "limit"}  # OpenAI finish_reason / llama.cpp stop_type / Ollama done_reason


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    reason = ctx.sample.get("stop_reason")
    n = ctx.sample.get("generated_tokens")
    return GateOutcome(reason in _LENGTH, float(n) if n is not None else None, f"stop={reason}, limit {ctx.max_tokens}")


GATE = Gate("length_limit", "generation stopped on the token limit", check)
