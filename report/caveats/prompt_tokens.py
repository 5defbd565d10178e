"""Prompt token counts differ across models by more than 10 % in a class."""

from __future__ import annotations

import statistics

from cardproof.marks import N_
from .base import Caveat, CaveatRule

TITLE = N_('Prompt lengths differ')
TEXT = N_('In the {cls} class, {hi_model} read {excess} more prompt tokens than {lo_model} ({hi} against'
          ' {lo}) for the same text, because the tokenizers differ: its rates are measured on a longer '
          'prompt and are not directly comparable.')

LIMIT = 0.10


def check(view: dict) -> list[Caveat]:
    out = []
    for cls in view["classes"]:
        per_model = {}
        cells = {}
        for c in view["cells"]:
            toks = [s["prompt_tokens"] for s in c["samples"] if s["prompt_tokens"] and not s["error_kind"]]
            if c["prompt_class"] == cls and toks:
                per_model.setdefault(c["model"], []).extend(toks)
                cells.setdefault(c["model"], c["id"])
        if len(per_model) < 2:
            continue
        med = {m: statistics.median(v) for m, v in per_model.items()}
        lo_m = min(med, key=med.get)
        hi_m = max(med, key=med.get)
        excess = med[hi_m] / med[lo_m] - 1
        if excess > LIMIT:
            out.append(
                Caveat(
                    "prompt_tokens",
                    "warning",
                    TITLE,
                    TEXT,
                    {"cls": cls, "hi_model": hi_m, "lo_model": lo_m, "excess": ("pct", excess),
                     "hi": ("int", med[hi_m]), "lo": ("int", med[lo_m])},
                    (cells[hi_m], cells[lo_m]),
                )
            )
    return out


RULE = CaveatRule('prompt_tokens', check, order=20)
