"""Cells whose samples spread beyond the campaign's limits are noise, not findings.

One item per stability rule that fired (max/min ratio, bootstrap interval of
the median); the article merges them into one box.
"""

from __future__ import annotations

from cardproof.marks import N_, NP_
from .base import Caveat, CaveatRule

TITLE = N_('Unstable cells')
# (singular, plural): the form for the number of cells (n)
TEXT_RATIO = NP_('In {n} cell the fastest sample was more than {limit} times the slowest: {cells}. It is '
                 'marked in the tables and charts, and no headline, ratio or rule is stated from it.',
                 'In {n} cells the fastest sample was more than {limit} times the slowest: {cells}. They '
                 'are marked in the tables and charts, and no headline, ratio or rule is stated from '
                 'them.')
TEXT_INTERVAL = NP_('In {n} cell the 95 % bootstrap interval of the median was wider than ±{pct} %: '
                    '{cells}. It is marked in the tables and charts, and no headline, ratio or rule is'
                    ' stated from it.',
                    'In {n} cells the 95 % bootstrap interval of the median was wider than ±{pct} %: '
                    '{cells}. They are marked in the tables and charts, and no headline, ratio or rule is'
                    ' stated from them.')


def _cells(cells: list[dict]) -> tuple:
    return ("cells", [(c["model"], c["prompt_class"], bool(c["reasoning"])) for c in cells])


def check(view: dict) -> list[Caveat]:
    cells = view.get("unstable_cells") or []
    # a cell from an older view without unstable_by was judged by the ratio alone
    by_ratio = [c for c in cells if "ratio" in c.get("unstable_by", ["ratio"])]
    by_interval = [c for c in cells if "interval" in c.get("unstable_by", [])]
    out = []
    if by_ratio:
        out.append(Caveat(
            "unstable",
            "warning",
            TITLE,
            TEXT_RATIO,
            {"n": ("int", len(by_ratio)), "limit": ("num2", view.get("unstable_ratio")), "cells": _cells(by_ratio)},
            tuple(c["id"] for c in by_ratio),
        ))
    if by_interval:
        out.append(Caveat(
            "unstable",
            "warning",
            TITLE,
            TEXT_INTERVAL,
            {"n": ("int", len(by_interval)), "pct": ("num2", view.get("unstable_interval_pct")),
             "cells": _cells(by_interval)},
            tuple(c["id"] for c in by_interval),
        ))
    return out


RULE = CaveatRule('unstable', check, order=10)
