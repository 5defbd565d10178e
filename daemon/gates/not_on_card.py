from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    off, total = ctx.facts.get("offloaded_layers"), ctx.facts.get("total_layers")
    if isinstance(off, (int, float)) and isinstance(total, (int, float)) and total:
        share = off / total
        if share < 1.0:
            return GateOutcome(True, share, f"offloaded {off:.0f}/{total:.0f} layers")
        if ctx.gpu_share is None or ctx.gpu_share >= 1.0:
            return GateOutcome(False, share, f"offloaded {off:.0f}/{total:.0f} layers")
    if ctx.gpu_share is not None:
        return GateOutcome(ctx.gpu_share < 1.0, ctx.gpu_share, f"runtime reports {ctx.gpu_share:.0%} on the GPU")
    if not ctx.gpu_available:
        return GateOutcome(True, 0.0, f"no GPU: {ctx.gpu_reason or 'NVML sees none'}; the model runs on the CPU")
    return GateOutcome(None, None, "no offload facts and no GPU share for this load")


GATE = Gate("not_on_card", "offloaded layers below total, or GPU share below 100 %", check)
