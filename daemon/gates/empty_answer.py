"""``empty_answer``: the answer was whitespace only (reasoning text does not count as an answer)."""

from cardproof.marks import N_
from .base import Canary, Gate, GateOutcome, Said, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    answer = ctx.response.get("answer")
    if answer is None:
        chars = ctx.sample.get("answer_chars") or 0
        stripped = chars
    else:
        chars, stripped = len(answer), len(answer.strip())
    reasoning = ctx.sample.get("reasoning_chars")
    # "label: n" rather than "n characters": no plural form to get wrong for n = 1
    text = (Said("answer characters: {chars}, reasoning characters: {reasoning}",
                 {"chars": stripped, "reasoning": reasoning}) if reasoning
            else Said("answer characters: {chars}", {"chars": stripped}))
    return GateOutcome(stripped <= threshold, float(stripped), text)


def provoke(run) -> None:
    # end-of-sequence forced as the first token
    if run.eos is not None:
        _, t = run.sample("empty_answer", extra={"logit_bias": [[run.eos, 100]]})
        run.plan("empty_answer", sample_id=t.sample_id, detail={"eos_token_id": run.eos})
    else:
        run.plan("empty_answer", result="not_run", reason=Said("the server does not name its end-of-sequence token"))


GATE = Gate(
    "empty_answer",
    N_("the answer was empty (whitespace only)"),
    check,
    threshold_unit="chars",
    order=30,
    canary=Canary(provoke, order=20),
)
