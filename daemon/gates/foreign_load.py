from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    f = ctx.foreign
    if not f:
        return GateOutcome(None, None, "no source for foreign traffic (start llama-server with --metrics)")
    tokens = f.get("tokens") or 0
    requests = f.get("requests") or 0
    observed = float(max(tokens, requests))
    clients = ", ".join(f.get("clients") or [])
    text = f"{tokens} tokens generated for others, {requests} foreign requests" + (f" from {clients}" if clients else "")
    return GateOutcome(observed > threshold, observed, text + f" ({f.get('source')})")


GATE = Gate("foreign_load", "other clients used the server during the cell", check, threshold_unit="tokens or requests")
