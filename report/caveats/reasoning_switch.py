"""Reasoning was switched on, but no sample returned reasoning text."""

from __future__ import annotations

from cardproof.marks import N_, NP_
from ..findings import reasoning_took
from .base import Caveat, CaveatRule

TITLE = N_('The reasoning switch did not take')
# (singular, plural): the form for the number of answered samples (n)
TEXT = NP_('Reasoning was switched on for {model}, but its {n} answered sample returned no '
           'reasoning text: its "reasoning on" rows measure the same thing as "reasoning off".',
           'Reasoning was switched on for {model}, but none of its {n} answered samples returned '
           'reasoning text: its "reasoning on" rows measure the same thing as "reasoning off".')


def check(view: dict) -> list[Caveat]:
    out = []
    for m in view["models"]:
        # the same test keeps these rows out of the on/off chart (report.findings.reasoning_pairs)
        if reasoning_took(m) is not False:
            continue
        cells = [c for (cls, r), c in m["cells"].items() if r and c["valid"]]
        out.append(
            Caveat(
                "reasoning_switch",
                "warning",
                TITLE,
                TEXT,
                {"model": m["name"], "n": ("int", sum(len(c["valid"]) for c in cells))},
                tuple(c["id"] for c in cells),
            )
        )
    return out


RULE = CaveatRule('reasoning_switch', check, order=40)
