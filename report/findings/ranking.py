"""Prefill and decode rank the models differently: which is "faster" depends on the workload.

Prefill is compute-bound and decode reads the weights per token, so a model
can fill a long prompt faster than another and still answer slower. Stated
for pairs whose order differs measurably in both, in every prompt class
where that holds (a short prompt can reverse the order as a long one does),
from stable cells.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Term
from .pick import spread_unstable, stable_cell
from .stable import cells_measurable, measurable

TITLE = N_("Prefill and decode rank the models differently")
TEXT = N_("In the prompt class {cls} (up to {tokens} prompt tokens), ranked by decode the models are {by_decode}; ranked by "
          "prefill, {by_prefill}. {n} pairs swap places, measurably in both.")
TEXT_ONE = N_("In the prompt class {cls} (up to {tokens} prompt tokens), ranked by decode the models are {by_decode}; ranked "
              "by prefill, {by_prefill}. One pair swaps places, measurably in both.")
PAIR = N_("{a} decodes faster than {b} ({a_dec} against {b_dec} tok/s), but {b} fills the prompt faster ({b_pre} "
          "against {a_pre} tok/s)")
CONDITION = N_("Stated for pairs whose order differs beyond the samples' scatter in decode and in prefill (ranges apart "
               "and Welch's t-test at 5 %), from cells stable in both.")
CAVEAT = N_("Prefill was measured on this class's prompts; at other lengths its rate differs. Which order matters "
            "depends on the workload: long prompts with short answers weigh prefill, short prompts with long answers "
            "decode.")


def _values(cell: dict, key: str) -> list[float]:
    return [s[key] for s in cell["valid"] if isinstance(s.get(key), (int, float))]


def check(view: dict) -> list[Finding]:
    tokens = view.get("class_tokens") or {}
    out = []
    for cls in view.get("classes", []):
        if tokens.get(cls):
            out += _in_class(view, cls, tokens)
    return out


def _in_class(view: dict, cls: str, tokens: dict) -> list[Finding]:
    rows = []
    for m in view["models"]:
        c = stable_cell(m, cls)
        if c and c.get("prefill") and not spread_unstable(c["prefill"], view):
            rows.append((m["name"], c))
    pairs = []
    for a, ca in rows:
        for b, cb in rows:
            if (ca["decode"].median > cb["decode"].median and cb["prefill"].median > ca["prefill"].median
                    and cells_measurable(ca, cb)
                    and measurable(ca["prefill"], cb["prefill"], _values(ca, "prefill_tps"), _values(cb, "prefill_tps"))):
                pairs.append((a, ca, b, cb))
    if not pairs:
        return []

    by_decode = [n for n, _c in sorted(rows, key=lambda r: -r[1]["decode"].median)]
    by_prefill = [n for n, _c in sorted(rows, key=lambda r: -r[1]["prefill"].median)]
    figures = tuple(Line(PAIR, {"a": a, "b": b, "a_dec": Fig(ca["decode"].median, link=f"cell-{ca['id']}"),
                                "b_dec": Fig(cb["decode"].median, link=f"cell-{cb['id']}"),
                                "a_pre": Fig(ca["prefill"].median, digits=0, link=f"cell-{ca['id']}"),
                                "b_pre": Fig(cb["prefill"].median, digits=0, link=f"cell-{cb['id']}")})
                    for a, ca, b, cb in pairs)
    params = {"cls": Term(cls), "tokens": Fig(tokens[cls][1], "int"), "by_decode": _order(by_decode),
              "by_prefill": _order(by_prefill), "n": len(pairs)}
    return [Finding("ranking", f"ranking:{cls}", TITLE, TEXT_ONE if len(pairs) == 1 else TEXT, params, figures,
                    Line(CONDITION), Line(CAVEAT))]


def _order(names: list[str]) -> str:
    """Names from fastest to slowest, as one text from data (escaped when shown)."""
    return " > ".join(names)


RULE = FindingRule("ranking", check, order=30)
