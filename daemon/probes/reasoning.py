"""reasoning: short tasks with checked answers, each in a well-known and a changed form.

A famous puzzle can be recalled rather than solved: an earlier probe's
INCONCLUSIVE came from one memorised task. So every task is asked twice:
the well-known form (a *detector*, not scored) and a changed form with new
numbers (scored). A model that passes the well-known form and fails the
changed one, or answers the changed one with the famous answer, is shown as
having recalled it (arms ``memorised_suspect`` / ``recalled_famous_answer``).

The answer is read as a reader reads it (:mod:`.answers`): the ``ANSWER:``
line where the model wrote one, else the answer it declares in words, else
the number attached to the asked quantity (the minutes of "It would take 100
machines 5 minutes"), never simply the last number of the reply. Whether the
reply followed the asked format is kept as a fact (``format_followed``).

Arms of the scored form: ``correct`` (PASS), ``wrong_answer`` /
``recalled_famous_answer`` (OK_model_ran_and_was_wrong: an answer came and
was wrong), ``no_answer`` / ``no_answer_within_max_tokens`` (FAIL),
``looping`` (the reply repeats itself until the token limit, and declares no
answer: FAIL_BROKEN).
"""

from __future__ import annotations

from cardproof.marks import N_
from .answers import Asked, read
from .base import Probe, ProbeContext, Unit, failed_request, message
from .looping import looping

SUFFIX = "\nExplain briefly, then end with a last line of the form ANSWER: <number>."

TASKS = {
    "bat_ball": {
        "known": ("A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. "
                  "How much does the ball cost, in cents?", [5, 0.05]),
        "changed": ("A racket and a shuttlecock cost $2.30 in total. The racket costs $2.00 more than the "
                    "shuttlecock. How much does the shuttlecock cost, in cents?", [15, 0.15]),
        "recall": [5, 0.05],
        "asked": Asked("cents", subject=("ball", "shuttlecock"), others=("bat", "racket"),
                       totals=("total", "together", "combined")),
    },
    "widgets": {
        "known": ("If it takes 5 machines 5 minutes to make 5 widgets, how many minutes would it take "
                  "100 machines to make 100 widgets?", [5]),
        "changed": ("If it takes 7 machines 7 minutes to make 7 gadgets, how many minutes would it take "
                    "70 machines to make 140 gadgets?", [14]),
        "recall": [7],
        "asked": Asked("minutes"),
    },
    "lily_pad": {
        "known": ("A patch of lily pads doubles in size every day. It takes 48 days to cover the whole lake. "
                  "How many days does it take to cover half the lake?", [47]),
        "changed": ("A patch of algae doubles in size every day. It covers the whole pond on day 30. "
                    "On which day did it cover a quarter of the pond?", [28]),
        "recall": [29],
        "asked": Asked("day", subject=("half", "quarter"), others=("whole", "entire", "full")),
    },
}

def judge(resp: dict, accepted: list[float], recall: list[float] | None = None,
          asked: Asked = Asked("")) -> tuple[str, str, dict]:
    """Verdict, arm and detail for one answer (pure: tested with recorded responses)."""
    msg = message(resp)
    reading = read(msg["content"], asked)
    detail = reading.as_detail() | {"expected": accepted, "finish_reason": msg["finish_reason"]}
    if recall:
        detail["recall"] = recall
    value = reading.value
    if msg["finish_reason"] == "length" and reading.how not in ("answer_line", "answer_statement"):
        loop = looping(msg["content"])
        if loop:  # a number read from a reply that repeats itself until the limit is no answer
            return "FAIL_BROKEN", "looping", detail | {"looping": loop}
    if value is None:
        if msg["finish_reason"] == "length":
            return "FAIL", "no_answer_within_max_tokens", detail
        return "FAIL", "no_answer", detail
    if any(abs(value - a) < 1e-9 for a in accepted):
        return "PASS", "correct", detail
    if recall and any(abs(value - r) < 1e-9 for r in recall):
        return "OK_model_ran_and_was_wrong", "recalled_famous_answer", detail
    return "OK_model_ran_and_was_wrong", "wrong_answer", detail


def pair(task: str, known: Unit, changed: Unit) -> None:
    """Mark a well-known form whose pass the changed form does not bear out."""
    if known.verdict == "PASS" and changed.verdict != "PASS" and changed.verdict != "ERROR":
        known.verdict = "INCONCLUSIVE"
        known.arm = "memorised_suspect"
        known.detail["note"] = f"the well-known form passes, the changed form of {task} does not: recall, not reasoning"


def run(ctx: ProbeContext) -> list[Unit]:
    units = []
    for task, spec in TASKS.items():
        made = {}
        for form in ("known", "changed"):
            prompt, accepted = spec[form]
            body = {"messages": [{"role": "user", "content": prompt + SUFFIX}]}
            resp, ms, err = ctx.ask(body)
            exchange = {"requests": [body], "responses": [resp]}
            variant = f"{task}/{form}"
            if err:
                unit = failed_request(variant, err, ms, exchange)
            else:
                verdict, arm, detail = judge(resp, accepted, spec["recall"] if form == "changed" else None, spec["asked"])
                unit = Unit(variant, verdict, arm, ms, exchange, detail=detail)
            unit.graded = form == "changed"
            made[form] = unit
        pair(task, made["known"], made["changed"])
        units += [made["known"], made["changed"]]
    return units


def facts(say) -> dict[str, str]:
    """The counts the defects register quotes, from :data:`TASKS` itself."""
    from .defects import number_words

    return {"tasks": number_words(len(TASKS), say)}


PROBE = Probe("reasoning", None, "short tasks with checked answers, well-known and changed forms", run, order=30,
              asked_format=N_("a last line `ANSWER:` with the number"), facts=facts)
