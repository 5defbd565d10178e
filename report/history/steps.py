"""Steps, not noise: change points in one series of runs, judged on the samples.

A candidate split comes from a CUSUM scan of the log point medians (one
pass over a segment, so binary segmentation stays linear-ish in runs). The
candidate is then judged on the *samples* of the runs next to it: a
hierarchical bootstrap (runs resampled, then samples within each run, fixed
seed) of the ratio of medians after/before. A step is claimed only where
the interval excludes "no change" and the estimate is at least the
campaign's minimum effect; anything less is noise, and the segment is left
whole. Points that may not carry a step (interrupted runs, unstable cells)
never reach this module.

Two guards against run-to-run noise, which the samples of one run cannot
show: a step needs ``MIN_RUNS_PER_SIDE`` runs on each side (one run that
reads low is an outlier until the next run confirms it: "and stayed
there"), and it must exceed the segment's own run-to-run noise (a robust
estimate from consecutive run medians, ``NOISE_Z`` standard errors), since
the search tries every split and the best of many noisy splits looks like
a step.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

#: runs on each side of a candidate whose samples judge it: the level right
#: before and after the step, and a bounded cost per test however long the series
WINDOW_RUNS = 6
BOOTSTRAP_ROUNDS = 500
#: two-sided interval reported and used to judge a step
INTERVAL = 0.95
MIN_RUNS_PER_SIDE = 2
NOISE_Z = 3.5


@dataclass(frozen=True)
class Step:
    """A level change between ok point ``before`` and ok point ``after`` (indices into the ok points).

    ``ratio`` is median(after-window samples) / median(before-window samples);
    ``low``/``high`` its bootstrap interval; ``stayed`` the ok points from
    ``after`` to the next step or the end (how long the new level held).
    """

    before: int
    after: int
    ratio: float
    low: float
    high: float
    stayed: int


def _cusum_split(logs: list[float], lo: int, hi: int) -> int | None:
    """The split s (lo < s < hi) with the largest standardised mean difference of ``logs``."""
    n = hi - lo
    if n < 2:
        return None
    total = sum(logs[lo:hi])
    best, best_s, left = -1.0, None, 0.0
    for s in range(lo + 1, hi):
        left += logs[s - 1]
        nl, nr = s - lo, hi - s
        diff = abs(left / nl - (total - left) / nr) * math.sqrt(nl * nr / n)
        if diff > best:
            best, best_s = diff, s
    return best_s


def _pooled_median(groups: list[list[float]]) -> float:
    return statistics.median([v for g in groups for v in g])


def _resample_median(rnd, groups: list[list[float]]) -> float:
    """Median of one resample: runs with replacement, then samples within each chosen run (run-to-run
    noise counts too). ``rnd`` is a ``random.Random().random``; indices drawn as ``int(rnd() * n)``
    (what ``Random.choices`` does, without its per-call cost: this is the bootstrap's inner loop)."""
    k = len(groups)
    out: list[float] = []
    for _ in range(k):
        g = groups[int(rnd() * k)]
        m = len(g)
        out += [g[int(rnd() * m)] for _ in range(m)]
    out.sort()
    n = len(out)
    return out[n // 2] if n % 2 else (out[n // 2 - 1] + out[n // 2]) / 2


def judge(before: list[list[float]], after: list[list[float]], min_effect: float, seed: str
          ) -> tuple[float, float, float] | None:
    """(ratio, low, high) of after/before where the samples support a step of at least ``min_effect``, else None."""
    if not before or not after:
        return None
    m_before, m_after = _pooled_median(before), _pooled_median(after)
    if m_before <= 0 or m_after <= 0:
        return None
    ratio = m_after / m_before
    # below the minimum effect no interval can make it a step: skip the bootstrap
    if abs(ratio - 1) < min_effect:
        return None
    rnd = random.Random(seed).random
    ratios = []
    for _ in range(BOOTSTRAP_ROUNDS):  # fixed: the cost per candidate is bounded however long the series
        b = _resample_median(rnd, before)
        a = _resample_median(rnd, after)
        if b > 0:
            ratios.append(a / b)
    if len(ratios) < BOOTSTRAP_ROUNDS // 2:
        return None
    ratios.sort()
    tail = (1 - INTERVAL) / 2
    low = ratios[int(tail * (len(ratios) - 1))]
    high = ratios[int(math.ceil((1 - tail) * (len(ratios) - 1)))]
    if low <= 1 <= high:  # the samples overlap "no change": no step
        return None
    return ratio, low, high


def run_noise(logs: list[float]) -> float:
    """Standard deviation of log run medians from one run to the next, robust to a step among them.

    The median absolute difference of consecutive values (scaled to a
    standard deviation): a level change moves one difference, not the median.
    """
    if len(logs) < 3:
        return 0.0
    diffs = sorted(abs(b - a) for a, b in zip(logs, logs[1:]))
    return 1.4826 * statistics.median(diffs) / math.sqrt(2)


def find_steps(points: list[list[float]], min_effect: float, seed: str = "",
               judged: tuple[dict, dict] | None = None) -> list[Step]:
    """Steps in a series of ok points, each a list of its samples (positive values), in time order.

    Binary segmentation: the best CUSUM split of a segment is judged on the
    samples of up to ``WINDOW_RUNS`` points on each side; an accepted split
    cuts the segment and both halves are searched again, a rejected one
    leaves it whole.

    ``judged`` (last build's verdicts, this build's): a candidate's verdict depends only on its seed, the
    minimum effect and the samples of its windows, so a series that gained a point at its end judges
    again only the candidates whose windows reach the new point. This build's dict gets every verdict
    it used.
    """
    usable = [[v for v in p if v is not None and v > 0 and math.isfinite(v)] for p in points]
    logs = [math.log(statistics.median(p)) if p else 0.0 for p in usable]
    splits: dict[int, tuple[float, float, float]] = {}
    todo = [(0, len(usable))]
    while todo:
        lo, hi = todo.pop()
        s = _cusum_split(logs, lo, hi)
        if s is None:
            continue
        before = [p for p in usable[max(lo, s - WINDOW_RUNS):s] if p]
        after = [p for p in usable[s:min(hi, s + WINDOW_RUNS)] if p]
        if min(len(before), len(after)) < MIN_RUNS_PER_SIDE:
            continue
        # the cheap tests first: the bootstrap runs only at a candidate beyond the run-to-run noise
        noise = run_noise(logs[lo:hi]) * math.sqrt(1 / len(before) + 1 / len(after))
        ratio = _pooled_median(after) / _pooled_median(before)
        if abs(math.log(ratio)) < NOISE_Z * noise:
            continue
        if judged is None:
            verdict = judge(before, after, min_effect, f"{seed}|{s}")
        else:
            key = (f"{seed}|{s}", min_effect, tuple(map(tuple, before)), tuple(map(tuple, after)))
            verdict = judged[0][key] if key in judged[0] else judge(before, after, min_effect, key[0])
            judged[1][key] = verdict
        if verdict is None:
            continue
        splits[s] = verdict
        todo += [(lo, s), (s, hi)]
    cuts = sorted(splits)
    out = []
    for i, s in enumerate(cuts):
        end = cuts[i + 1] if i + 1 < len(cuts) else len(usable)
        ratio, low, high = splits[s]
        out.append(Step(before=s - 1, after=s, ratio=ratio, low=low, high=high, stayed=end - s))
    return out
