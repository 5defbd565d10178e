"""What a run may state as a finding: stable cells, measurable differences, the headline.

A cell whose decode samples spread beyond the campaign's ``[report]
unstable_ratio`` (max/min) is *unstable*: it is marked wherever it is shown,
and no headline, ratio or rule arm is stated from it. A campaign may add
``unstable_interval_pct``: a cell is then also unstable where the 95 %
bootstrap interval of its median reaches further than that many percent from
the median. The bootstrap draws from a fixed seed, so a build gives the same
verdict every time. With five samples or fewer the interval is the min–max
range (each end is the median of more than 2.5 % of the resamples), so the
variant matters for cells with many repetitions. Two medians whose
min–max ranges overlap differ by less than their own spread: the text says
"no measurable difference", not a ratio; so it does where the ranges come
apart but the samples do not differ beyond their scatter (Welch's t-test at
5 %): with three samples a side, ranges of one source come apart one time
in ten.
"""

from __future__ import annotations

import math
import random
import statistics

from cardproof.daemon.campaign.check import DEFAULT_UNSTABLE_RATIO, report_settings
from cardproof.daemon.store import json_value

from ..stats import Spread

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240613  # fixed: the same samples give the same interval in every build
BOOTSTRAP_LEVEL = 0.95


def report_limits(campaign_json: str | None) -> dict:
    """The ``[report]`` limits of a run's campaign as parsed when it was frozen (``campaigns.campaign_json``):
    ``unstable_ratio``, ``unstable_interval_pct`` (None: off) and ``min_effect_pct``.

    A campaign unreadable when frozen (NULL) or a damaged row must not stop a build: the defaults.
    """
    report = json_value(campaign_json, dict, {}).get("report")
    try:
        return report_settings({"report": report}, "<frozen campaign>")  # a damaged row's values checked again
    except Exception:  # noqa: BLE001 -- NULL, or a row damaged since: the defaults
        return {"unstable_ratio": DEFAULT_UNSTABLE_RATIO, "unstable_interval_pct": None}


def unstable_ratio(campaign_json: str | None) -> float:
    """The ``[report] unstable_ratio`` of a run's campaign as parsed when frozen; the default where absent."""
    return report_limits(campaign_json)["unstable_ratio"]


def median_interval(values, *, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95 % percentile bootstrap interval of the median; None with fewer than 2 values.

    The values are sorted first, so the interval does not depend on the
    order the samples were stored in, only on the values and the seed.
    """
    vals = sorted(float(v) for v in values if v is not None)
    if len(vals) < 2:
        return None
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(vals, k=len(vals))) for _ in range(resamples))
    tail = (1 - BOOTSTRAP_LEVEL) / 2
    return medians[int(tail * resamples)], medians[int((1 - tail) * resamples) - 1]


def interval_too_wide(median: float, interval: tuple[float, float] | None, pct: float | None) -> bool:
    """True where ``interval`` reaches further than ``pct`` percent from ``median`` on either side."""
    if interval is None or pct is None:
        return False
    low, high = interval
    if median <= 0:  # around a zero median any width is infinitely wide, relatively
        return high > low
    return low < median * (1 - pct / 100) or high > median * (1 + pct / 100)


def judge_cell(cell: dict, limits: dict) -> None:
    """Set ``spread_ratio``, ``median_interval``, ``unstable_by`` (rules that fired) and ``unstable`` on a cell.

    ``cell["decode"]`` is its spread and ``cell["valid"]`` its valid samples.
    """
    d = cell["decode"]
    cell["spread_ratio"] = spread_ratio(d)
    pct = limits.get("unstable_interval_pct")
    cell["median_interval"] = median_interval(s["decode_tps"] for s in cell["valid"]) if pct and d else None
    fired = []
    if is_unstable(d, limits["unstable_ratio"]):
        fired.append("ratio")
    if d and interval_too_wide(d.median, cell["median_interval"], pct):
        fired.append("interval")
    cell["unstable_by"] = fired
    cell["unstable"] = bool(fired)


def spread_ratio(s: Spread | None) -> float | None:
    """max/min of a cell's samples; inf where the slowest sample is 0, None with fewer than 2 samples."""
    if s is None or s.n < 2:
        return None
    if s.low <= 0:
        return float("inf")
    return s.high / s.low


def is_unstable(s: Spread | None, limit: float) -> bool:
    r = spread_ratio(s)
    return r is not None and r > limit


#: the level at which two sets of samples count as different
ALPHA = 0.05


def welch_p(xs: list[float], ys: list[float]) -> float | None:
    """Two-sided p-value of Welch's t-test (what SciPy's ``ttest_ind`` with unequal variances gives, exact
    fractional degrees of freedom) for the means of ``xs`` and ``ys``; None with fewer than two samples
    a side, 0.0 or 1.0 where neither side scatters (any difference is one, no difference is none).

    The statistic and its Welch-Satterthwaite degrees of freedom are worked out here and only Student's
    t distribution is SciPy's (``stdtr``): ``ttest_ind`` itself cost about 1.5 ms a call in argument
    handling, and a build compares every pair of cells of every run it renders."""
    nx, ny = len(xs), len(ys)
    if nx < 2 or ny < 2:
        return None
    vx, vy = statistics.variance(xs), statistics.variance(ys)
    if vx == 0 and vy == 0:
        return 0.0 if statistics.fmean(xs) != statistics.fmean(ys) else 1.0
    from scipy.special import stdtr  # imported only where two cells are compared

    ex, ey = vx / nx, vy / ny
    t = (statistics.fmean(xs) - statistics.fmean(ys)) / math.sqrt(ex + ey)
    df = (ex + ey) ** 2 / (ex ** 2 / (nx - 1) + ey ** 2 / (ny - 1))
    return float(min(1.0, 2 * stdtr(df, -abs(t))))


def welch_differs(xs: list[float], ys: list[float]) -> bool:
    """Welch's t-test, two-sided at 5 %: do the means of ``xs`` and ``ys`` differ beyond their scatter?"""
    p = welch_p(xs, ys)
    return p is not None and p < ALPHA


def measurable(a: Spread, b: Spread, a_values: list[float] | None = None,
               b_values: list[float] | None = None) -> bool:
    """True when the two min–max ranges do not overlap *and* that is more than chance.

    Two ranges of few samples come apart by chance alone: three samples against three from the same
    source do so one time in ten, two against two one time in three. So, beyond the ranges, the
    samples (``a_values``, ``b_values``, where given) must differ by Welch's t-test at 5 %; with
    only the spreads, there must be enough samples that ranges of one source come apart like that
    at most 5 % of the time (2 / C(na + nb, na): four against four, 2.9 %). A single sample on
    either side is never a measurable difference: it has no scatter to judge by.
    """
    if not (a.low > b.high or b.low > a.high):
        return False
    if a_values is not None and b_values is not None:
        return welch_differs([float(v) for v in a_values], [float(v) for v in b_values])
    if not (a.n >= 2 and b.n >= 2):
        return False
    return 2 / math.comb(a.n + b.n, a.n) <= 0.05


def cell_values(cell: dict) -> list[float] | None:
    """A cell's valid decode samples (the figures its spread is made of), or None where the view has none."""
    valid = cell.get("valid")
    if valid is None:
        return None
    return [s["decode_tps"] for s in valid if isinstance(s.get("decode_tps"), (int, float))]


def cells_measurable(a: dict, b: dict) -> bool:
    """``measurable`` of two cells of a run view, from their samples."""
    return measurable(a["decode"], b["decode"], cell_values(a), cell_values(b))


def _compare(cls: str, rated: list[tuple[dict, dict]]) -> dict | None:
    """Fastest stable model of one class against the pinned model (else the slowest)."""
    if not rated:
        return None
    rated = sorted(rated, key=lambda mc: mc[1]["decode"].median, reverse=True)
    best_m, best_c = rated[0]
    others = rated[1:]
    if not others:
        return {"cls": cls, "best": best_m, "best_cell": best_c, "other": None, "other_cell": None}
    pinned = [mc for mc in others if mc[0]["pinned"]]
    other_m, other_c = pinned[0] if pinned else others[-1]
    a, b = best_c["decode"], other_c["decode"]
    return {
        "cls": cls, "best": best_m, "best_cell": best_c, "other": other_m, "other_cell": other_c,
        "ratio": a.median / b.median if b.median else None,
        "ratio_low": a.low / b.high if b.high else None,
        "ratio_high": a.high / b.low if b.low else None,
        "measurable": cells_measurable(best_c, other_c),
        "p": welch_p(cell_values(best_c) or [], cell_values(other_c) or []),
        "apart": a.low > b.high or b.low > a.high,  # ranges apart, yet perhaps not beyond the samples' scatter
    }


def headline(models: list[dict], classes: list[str]) -> dict | None:
    """What holds across the prompt classes, from stable cells only.

    ``rows``: one comparison per class (reasoning off where measured);
    ``agree``: the same model is fastest against the same reference in every
    class with a measurable difference in each, so one sentence can say it;
    ``unstable``: cells left out because their spread is beyond the limit.
    The first row's keys are repeated at the top level for the cross-run
    ratio range (``cls``, ``best``, ``other``, ``ratio``...).
    """
    rows, left_out = [], []
    for cls in classes:
        rated = []
        for m in models:
            c = m["cells"].get((cls, False)) or m["cells"].get((cls, True))
            if not (c and c["decode"]):
                continue
            if c.get("unstable"):
                left_out.append(c)
                continue
            rated.append((m, c))
        row = _compare(cls, rated)
        if row:
            rows.append(row)
    if not rows:
        return None
    pairs = [r for r in rows if r["other"]]
    agree = bool(pairs) and len(pairs) == len(rows) and all(r["measurable"] for r in pairs) and len(
        {(r["best"]["name"], r["other"]["name"]) for r in pairs}) == 1
    first = next((r for r in pairs if r["measurable"]), None)
    # no ratio is carried across runs from a difference smaller than the spread
    top = first or (rows[0] | {"other": None, "other_cell": None})
    return top | {"rows": rows, "agree": agree, "unstable": left_out}


def every_sample_order(models: list[dict], classes: list[str]) -> list[dict]:
    """Per class, which model was faster than which in every sample, where an unstable cell is involved.

    No ratio can be stated from an unstable cell, but an order still holds
    when the slowest sample of one model beats the fastest of another: that
    is what the article can say when the headline leaves a cell out. Pairs of
    two stable cells are the headline's and are not repeated here. Each entry:
    ``cls``, ``faster`` (model), ``low`` (its slowest sample), ``cell``, and
    ``slower``: [{``model``, ``high`` (fastest sample), ``cell``}], fastest first.
    """
    out = []
    for cls in classes:
        cells = []
        for m in models:
            c = m["cells"].get((cls, False)) or m["cells"].get((cls, True))
            if c and c["decode"]:
                cells.append((m, c))
        for m, c in sorted(cells, key=lambda mc: mc[1]["decode"].median, reverse=True):
            beaten = [{"model": om, "high": oc["decode"].high, "cell": oc}
                      for om, oc in cells
                      if om is not m and c["decode"].low > oc["decode"].high
                      and (c.get("unstable") or oc.get("unstable"))]
            if beaten:
                out.append({"cls": cls, "faster": m, "low": c["decode"].low, "cell": c,
                            "slower": sorted(beaten, key=lambda b: b["high"], reverse=True)})
    return out


def reasoning_took(model: dict) -> bool | None:
    """Whether switching reasoning on produced reasoning text for ``model``.

    None where no reasoning-on cell was answered; False where none of its
    answered samples carried reasoning text, so its "on" rows measure the
    same thing as "off". The caveat and the on/off chart both ask this.
    """
    cells = [c for (_cls, r), c in model["cells"].items() if r and c["valid"]]
    if not cells:
        return None
    return any((s["reasoning_chars"] or 0) > 0 for c in cells for s in c["valid"])


def reasoning_pairs(view: dict) -> tuple[list[dict], list[dict]]:
    """(pairs that may be shown as an effect, pairs left out with the reason).

    A pair is one model and class measured with reasoning off and on. It is
    left out where the switch did not take or either cell is unstable.
    """
    shown, left_out = [], []
    for m in view["models"]:
        took = reasoning_took(m)
        for cls in view["classes"]:
            off, on = m["cells"].get((cls, False)), m["cells"].get((cls, True))
            if not (off and on and off["decode"] and on["decode"]):
                continue
            pair = {"model": m["name"], "cls": cls, "off": off, "on": on}
            if took is False:
                left_out.append(pair | {"reason": "switch"})
            elif off.get("unstable") or on.get("unstable"):
                left_out.append(pair | {"reason": "unstable"})
            else:
                shown.append(pair | {"delta": on["decode"].median / off["decode"].median - 1
                                     if off["decode"].median else None,
                                     "measurable": cells_measurable(off, on)})
    return shown, left_out
