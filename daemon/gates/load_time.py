from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    if ctx.load_inside_seconds is not None:
        # any load inside a measured request spoils it, however short
        return GateOutcome(True, ctx.load_inside_seconds, f"model loaded inside the request ({ctx.load_inside_seconds:.2f} s)")
    if ctx.load_duration_seconds is not None:
        return GateOutcome(ctx.load_duration_seconds >= threshold, ctx.load_duration_seconds, "runtime load_duration")
    return GateOutcome(False, 0.0, "no load inside the request")


GATE = Gate(
    "load_time",
    "a model load happened inside the measured request",
    check,
    default_threshold=1.0,
    threshold_unit="s",
)
