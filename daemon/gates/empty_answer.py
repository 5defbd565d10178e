from .base import Gate, GateOutcome, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    answer = ctx.response.get("answer")
    if answer is None:
        chars = ctx.sample.get("answer_chars") or 0
        stripped = chars
    else:
        chars, stripped = len(answer), len(answer.strip())
    text = f"{stripped} answer characters" + (
        f", {ctx.sample.get('reasoning_chars')} reasoning" if ctx.sample.get("reasoning_chars") else ""
    )
    return GateOutcome(stripped <= threshold, float(stripped), text)


GATE = Gate("empty_answer", "the answer was empty (whitespace only)", check, threshold_unit="chars")
