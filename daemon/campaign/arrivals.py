"""Poisson arrival schedules of the rate steps: seeded, so a run can be repeated exactly.

The inter-arrival times of a Poisson process at ``rate_rps`` are
independent and exponential with mean ``1 / rate_rps``. Each step draws
from its own generator, seeded by the campaign's ``seed`` and the step's
rate (not its position), so the same rate gets the same arrivals whatever
other steps the campaign lists, for every model of the run.
"""

from __future__ import annotations

import random


def step_rng(rate_rps: float, seed: int) -> random.Random:
    # a str seed is hashed with SHA-512 by random.Random (version 2): stable across Python versions
    return random.Random(f"cardproof-poisson/{seed}/{float(rate_rps)!r}")


def poisson_schedule(rate_rps: float, seed: int, *, count: int | None = None, duration_s: float | None = None,
                     cap: int | None = None) -> list[float]:
    """Send times in seconds from the step's start: the first ``count``, or all before ``duration_s``.

    With ``duration_s`` at most ``cap`` times are returned (``cap`` + 1 tells
    a caller the schedule is longer than it allows). The first request is
    sent one exponential gap after the start, like every later one.
    """
    if (count is None) == (duration_s is None):
        raise ValueError("give count or duration_s")
    rng = step_rng(rate_rps, seed)
    out: list[float] = []
    at = 0.0
    limit = count if count is not None else (cap + 1 if cap is not None else None)
    while limit is None or len(out) < limit:
        at += rng.expovariate(rate_rps)
        if duration_s is not None and at >= duration_s:
            break
        out.append(at)
    return out
