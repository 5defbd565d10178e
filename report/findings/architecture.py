"""Architecture explains speed: mixture-of-experts against dense models, by what their GGUF headers say.

A mixture of experts passes only the experts it routes a token to through
the card, so a 30B-A3B model decodes like a 3B one while a 27B dense model
reads all of its weights per token. Where every model of one group decodes
measurably faster than every model of the other, that is the finding, with
each model's active parameters; where the groups overlap, the architecture
is not what the speeds show, and nothing is said.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Term
from .pick import bits_per_weight, first_class, is_moe, shape, stable_cell
from .stable import cells_measurable

TITLE = N_("Architecture explains speed")
TEXT_FOLLOWS = N_("In the prompt class {cls}, {groups}: {fast} tok/s against {slow} "
                  "tok/s. Ranked by decode, the models follow their active parameters per token: no model with more "
                  "of them decodes measurably faster than one with fewer.")
TEXT_BREAKS = N_("In the prompt class {cls}, {groups}: {fast} tok/s against {slow} "
                 "tok/s. Ranked by decode, the models do not all follow their active parameters per token: {breaks}.")
MOE_FASTER = N_("every mixture-of-experts model decodes faster than every dense model")
DENSE_FASTER = N_("every dense model decodes faster than every mixture-of-experts model")
BREAK = N_("{fast} decodes measurably faster than {slow} with more active parameters")
DENSE = N_("dense")
RANGE = N_("{low} to {high}")
EXPERTS = N_("{used} of {count} experts per token")
FIGURE = N_("{model}: {kind}, {active} of {params} parameters active per token, {bits} bits per weight; "
            "decode {tps} tok/s, {per} tok/s per billion active parameters")
CONDITION = N_("The GGUF headers give each model's experts and parameters; the two groups' decode ranges in stable "
               "cells do not overlap, and every pair across them differs beyond the samples' scatter (Welch's t-test "
               "at 5 %).")
CAVEAT_BITS = N_("Every model has about {bits} bits per weight, but decode follows the bytes read per token, which "
                 "the active parameters set only together with the quantisation of the tensors they use. One prompt "
                 "class, one request at a time, on this machine.")
CAVEAT = N_("The groups differ in more than their experts: bits per weight run from {bits_low} to {bits_high}, and "
            "decode follows the bytes read per token, which the active parameters set only together with the "
            "quantisation. One prompt class, one request at a time, on this machine.")


def check(view: dict) -> list[Finding]:
    cls = first_class(view)
    if cls is None:
        return []
    rows = []
    for m in view["models"]:
        s = shape(view, m["name"])
        moe, cell = is_moe(s), stable_cell(m, cls)
        active = s.get("active_params")
        if moe is None or cell is None or not isinstance(active, int) or active <= 0:
            continue
        rows.append({"model": m, "shape": s, "moe": moe, "cell": cell, "active": active})
    groups = {True: [r for r in rows if r["moe"]], False: [r for r in rows if not r["moe"]]}
    if not groups[True] or not groups[False]:
        return []

    def tps(r):
        return r["cell"]["decode"].median

    fast, slow = (True, False) if max(map(tps, groups[True])) >= max(map(tps, groups[False])) else (False, True)
    if not all(a["cell"]["decode"].low > b["cell"]["decode"].high and cells_measurable(a["cell"], b["cell"])
               for a in groups[fast] for b in groups[slow]):
        return []  # the groups overlap: the architecture is not what these speeds show
    breaks = [Line(BREAK, {"fast": b["model"]["name"], "slow": a["model"]["name"]})
              for a in rows for b in rows
              if a["active"] < b["active"] and tps(b) > tps(a) and cells_measurable(a["cell"], b["cell"])]
    ordered = sorted(rows, key=lambda r: -tps(r))
    figures = tuple(Line(FIGURE, {
        "model": r["model"]["name"],
        "kind": (Line(EXPERTS, {"used": r["shape"]["expert_used_count"], "count": r["shape"]["expert_count"]})
                 if r["moe"] else Term(DENSE)),
        "active": Fig(r["active"], "params"), "params": Fig(r["shape"]["params"], "params"),
        "bits": Fig(bits_per_weight(r["shape"]), digits=2),
        "tps": Fig(tps(r), link=f"cell-{r['cell']['id']}"),
        "per": Fig(tps(r) / (r["active"] / 1e9), digits=2),
    }) for r in ordered)
    bits = [b for b in (bits_per_weight(r["shape"]) for r in rows) if b is not None]
    params = {
        "cls": Term(cls), "groups": Line(MOE_FASTER if fast else DENSE_FASTER),
        "fast": _range([tps(r) for r in groups[fast]]), "slow": _range([tps(r) for r in groups[slow]]),
    }
    if breaks:
        params["breaks"] = breaks
    return [Finding("architecture", f"architecture:{cls}", TITLE, TEXT_BREAKS if breaks else TEXT_FOLLOWS, params,
                    figures, Line(CONDITION), _caveat(bits))]


def _range(values: list[float]):
    """A group's decode medians: one figure, or the lowest to the highest."""
    low, high = Fig(min(values)), Fig(max(values))
    return low if len(values) == 1 else Line(RANGE, {"low": low, "high": high})


def _caveat(bits: list[float]) -> Line:
    if bits and round(min(bits), 1) == round(max(bits), 1):
        return Line(CAVEAT_BITS, {"bits": Fig(min(bits), digits=1)})
    return Line(CAVEAT, {"bits_low": Fig(min(bits) if bits else None, digits=2),
                         "bits_high": Fig(max(bits) if bits else None, digits=2)})


RULE = FindingRule("architecture", check, order=10)
