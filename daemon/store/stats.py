"""Percentiles and per-step aggregates, computed from the stored rows whenever they are read.

Nothing here is stored: the figures of a step are always what its sample
rows say, so a figure and the samples behind it cannot disagree.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field

from cardproof.daemon.store import json_value

PERCENTILES = (50, 90, 99)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile by linear interpolation between closest ranks (numpy's default).

    None for no values; one value is every percentile of itself.
    """
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Spread:
    """p50/p90/p99 of one quantity over a step, with n and min–max."""

    n: int
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: list) -> "Spread":
        xs = [v for v in values if v is not None and math.isfinite(v)]
        if not xs:
            return cls(0)
        return cls(len(xs), percentile(xs, 50), percentile(xs, 90), percentile(xs, 99), min(xs), max(xs))


@dataclass
class StepFigures:
    """What one load or depth step measured, from its stored samples."""

    step: dict
    requests: int  # samples stored for the step
    errors: int  # exception samples among them
    output_tps: float | None  # generated tokens of answered requests per second of the step's wall time
    requests_per_s: float | None
    decode_tps: Spread  # per request, from the server's counters
    prefill_tps: Spread
    prompt_tokens: Spread
    ttft_ms: Spread
    itl_ms: Spread  # every interval between text chunks of every request
    e2e_ms: Spread
    queue_ms: Spread  # TTFT minus the server's prefill time
    error_kinds: dict[str, int] = field(default_factory=dict)
    # rate steps (open loop): what was offered, how fast requests really went out, the most in flight
    rate_rps: float | None = None  # offered, as the campaign asked
    sent_rps: float | None = None  # requests sent per second between the first and the last send
    max_in_flight: int | None = None  # over every request sent, answered or not
    late_ms: Spread = field(default_factory=lambda: Spread(0))  # sent after its planned time, by this much
    answer_tokens: Spread = field(default_factory=lambda: Spread(0))  # generated tokens per answered request


def step_figures(conn: sqlite3.Connection, step: dict) -> StepFigures:
    """The figures of ``step`` (a ``load_steps`` row as a dict) from its samples."""
    rows = conn.execute(
        """select s.error_kind, s.generated_tokens, s.decode_tps, s.prefill_tps, s.prompt_tokens, s.ttft_ms,
                  s.wall_ms, ls.queue_ms, ls.itl_ms_json, ls.sent_s, ls.scheduled_s, ls.in_flight
           from samples s left join load_samples ls on ls.sample_id = s.id
           where s.cell_id = ? order by s.id""",
        [step["cell_id"]],
    ).fetchall()
    ok = [r for r in rows if r[0] is None]
    errors: dict[str, int] = {}
    for r in rows:
        if r[0] is not None:
            errors[r[0]] = errors.get(r[0], 0) + 1
    wall = step.get("wall_s")
    generated = sum(r[1] or 0 for r in ok)
    itl: list[float] = []
    for r in ok:
        itl += _intervals(r[8])
    sent = sorted(r[9] for r in rows if _finite(r[9]))
    flights = [r[11] for r in rows if isinstance(r[11], int) and not isinstance(r[11], bool)]
    late = [(r[9] - r[10]) * 1000.0 for r in rows if _finite(r[9]) and _finite(r[10])]
    rate = step.get("rate_rps")
    return StepFigures(
        step=step,
        requests=len(rows),
        errors=len(rows) - len(ok),
        output_tps=generated / wall if wall and ok else None,
        requests_per_s=len(ok) / wall if wall and ok else None,
        decode_tps=Spread.of([r[2] for r in ok]),
        prefill_tps=Spread.of([r[3] for r in ok]),
        prompt_tokens=Spread.of([r[4] for r in ok]),
        ttft_ms=Spread.of([r[5] for r in ok]),
        itl_ms=Spread.of(itl),
        e2e_ms=Spread.of([r[6] for r in ok]),
        queue_ms=Spread.of([r[7] for r in ok]),
        error_kinds=errors,
        rate_rps=rate if _finite(rate) else None,
        sent_rps=(len(sent) - 1) / (sent[-1] - sent[0]) if len(sent) > 1 and sent[-1] > sent[0] else None,
        max_in_flight=max(flights) if flights else None,
        late_ms=Spread.of(late),
        answer_tokens=Spread.of([r[1] for r in ok]),
    )


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _intervals(text: str | None) -> list[float]:
    """The stored chunk intervals of one request; a damaged value counts as none."""
    values = json_value(text, list, [])
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def run_steps(conn: sqlite3.Connection, run_id: int, axis: str | None = None) -> list[StepFigures]:
    """Every step of a run (of one axis), in the order they were taken, with its figures."""
    cur = conn.execute(
        "select st.*, m.name as model from load_steps st left join models m on m.id = st.model_id "
        "where st.run_id = ? and (? is null or st.axis = ?) order by st.position, st.id",
        [run_id, axis, axis],
    )
    names = [d[0] for d in cur.description]
    return [step_figures(conn, dict(zip(names, row))) for row in cur.fetchall()]


def rate_digits(rate_rps) -> int:
    """Decimals that show an offered rate as the campaign wrote it: 2 -> "2", 0.5 -> "0.5", 0.25 -> "0.25"."""
    if not isinstance(rate_rps, (int, float)) or isinstance(rate_rps, bool) or not math.isfinite(rate_rps):
        return 0
    for digits in range(3):
        if abs(rate_rps * 10 ** digits - round(rate_rps * 10 ** digits)) < 1e-9 * max(1.0, abs(rate_rps)):
            return digits
    return 3
