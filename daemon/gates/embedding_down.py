from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    if not ctx.embedding_configured:
        return GateOutcome(False, None, "no embedding endpoint configured")
    failed = [p for p in ctx.embedding if not p.get("ok")]
    if not ctx.embedding:
        return GateOutcome(None, None, "embedding endpoint configured but never probed")
    text = "; ".join(f"{p.get('phase')}: {p.get('error') or 'ok'}" for p in ctx.embedding)
    return GateOutcome(bool(failed), float(len(failed)), text)


GATE = Gate("embedding_down", "the co-resident embedding model did not answer around the cell", check)
