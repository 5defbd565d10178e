"""Cells whose samples spread beyond the campaign's limit are noise, not findings."""

from __future__ import annotations

from .base import Caveat


def check(view: dict) -> list[Caveat]:
    cells = view.get("unstable_cells") or []
    if not cells:
        return []
    return [
        Caveat(
            "unstable",
            "warning",
            "Unstable cells",
            "In {n} cells the fastest sample was more than {limit} times the slowest: {cells}. They are "
            "marked in the tables and charts, and no headline, ratio or rule is stated from them.",
            {"n": ("int", len(cells)), "limit": ("num2", view.get("unstable_ratio")), "cells": ("cells", [(c["model"], c["prompt_class"], bool(c["reasoning"])) for c in cells])},
            tuple(c["id"] for c in cells),
        )
    ]
