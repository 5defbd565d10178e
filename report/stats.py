"""Spread with every number: median, min, max and n (principle 8)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)  # a year of trend points holds a quarter of a million (no __dict__ each)
class Spread:
    median: float
    low: float
    high: float
    n: int


def spread(values) -> Spread | None:
    """Median with min-max and n over the non-None values; None when there are none."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    return Spread(statistics.median(vals), min(vals), max(vals), len(vals))
