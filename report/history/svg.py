"""A trend chart drawn as SVG text directly: dates across, one metric up, a line per cell.

The trend charts have one fixed shape, so they are drawn here rather than
through Altair and vl-convert: validating and rendering a Vega-Lite spec
cost about 0.2 s per chart, and a campaign of many models has hundreds of
trend charts (the speed goal: a year of nightly runs inside the
report step's budget). Drawing is linear in the points.

What the chart shows is the same as before: median per run with its
min–max whisker, usable points joined by a line and filled, points that
cannot carry a step hollow and grey with a shape per state, and a dashed
rule at every run whose conditions changed. Numbers on the axis are in the
page's language; dates are numeric (YYYY-MM-DD) in both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from xml.sax.saxutils import escape, quoteattr

from ..i18n import Lang
from .numbers import formatter

PLOT_WIDTH_PX = 560
PLOT_HEIGHT_PX = 220
_LEFT, _TOP, _BOTTOM, _LEGEND = 64, 34, 62, 210
_GREY = "#888888"
# a palette that tells ten lines apart in print and for the common colour-vision deficiencies
_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6",
            "#9d755d", "#bab0ac"]
_SHAPES = ["square", "triangle", "diamond", "cross"]
#: longest legend label drawn (the full text is the element's tooltip)
_LABEL_CHARS = 34


def _seconds(date) -> float | None:
    """Seconds since the epoch of a stored date, or None for anything that is no date (skipped, not fatal)."""
    if not isinstance(date, str) or not date:
        return None
    if date in _SECONDS:  # a run's date is drawn in every chart of its page, in both languages
        return _SECONDS[date]
    try:
        d = datetime.fromisoformat(date.replace("Z", "+00:00"))
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    if len(_SECONDS) > 100_000:
        _SECONDS.clear()
    _SECONDS[date] = d.timestamp()
    return _SECONDS[date]


_SECONDS: dict[str, float] = {}


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    if high <= low:
        span = abs(low) * 0.1 or 1.0
        low, high = low - span, high + span
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, t = [], first
    while t <= high + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < high:
        ticks.append(round(t, 12))
    return ticks


def _digits(ticks: list[float]) -> int:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    return max(0, min(3, -math.floor(math.log10(step)))) if step > 0 else 0


def _marker(shape: str, x: float, y: float, colour: str, fill: str, tip: str = "") -> str:
    title = f"<title>{escape(tip)}</title>" if tip else ""
    common = f'stroke="{colour}" stroke-width="2" fill="{fill}"'
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" {common}>{title}</circle>'
    if shape == "square":
        return f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" {common}>{title}</rect>'
    pts = {"triangle": [(0, -5), (4.5, 3.5), (-4.5, 3.5)], "diamond": [(0, -5), (5, 0), (0, 5), (-5, 0)],
           "cross": [(-4, -4), (4, 4), (0, 0), (4, -4), (-4, 4)]}[shape]
    path = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in pts)
    return f'<polygon points="{path}" {common}>{title}</polygon>'


def _short(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[:_LABEL_CHARS - 1] + "…"


#: a cell's line keeps this many of its latest usable points as they are; older ones are drawn as
#: about as many marks again, each the median (and min–max) of a run of consecutive points
FULL_POINTS = 200


def _thinned(ps: list[tuple]) -> list[tuple]:
    """A cell's points (x, median, low, high, row) in date order, with older usable points binned.

    A year of nightly runs draws a level per week instead of a dot per night; the latest
    ``FULL_POINTS`` runs and every point that cannot carry a step stay as they are (the table and
    the CSV keep every run).
    """
    usable = [p for p in ps if p[4]["usable"]]
    if len(usable) <= 2 * FULL_POINTS:
        return ps
    older, latest = usable[:-FULL_POINTS], usable[-FULL_POINTS:]
    size = math.ceil(len(older) / FULL_POINTS)
    binned = []
    for i in range(0, len(older), size):
        part = older[i:i + size]
        medians = sorted(p[1] for p in part)
        row = dict(part[-1][4], run=None)  # a bin is no one run: its mark names no run
        binned.append((sum(p[0] for p in part) / len(part), medians[len(medians) // 2],
                       min(p[2] for p in part), max(p[3] for p in part), row))
    return sorted(binned + latest + [p for p in ps if not p[4]["usable"]], key=lambda p: p[0])


def trend_svg(rows: list[dict], changes: list[dict], L: Lang, title: str, axis_title: str) -> str:
    """The chart of ``rows`` (``chart.trend_rows``: date, median, low, high, cell, usable, state, run) as SVG.

    A row without a readable date or a finite median is left out (the
    page's table still names it); a chart with no drawable row says so.
    """
    return trend_svgs(rows, changes, [Labels(L, title, axis_title)])[0]


class Labels:
    """What one language's chart says: its title and axis title, and the names of the rows' cells and
    states (a row's ``cell`` and ``state`` are keys into these; a key with no name is its own text)."""

    def __init__(self, L: Lang, title: str, axis_title: str, cells: dict | None = None, states: dict | None = None):
        self.L, self.title, self.axis_title = L, title, axis_title
        self.cells, self.states = cells or {}, states or {}

    def cell(self, key) -> str:
        return self.cells.get(key, key)

    def state(self, key) -> str:
        return self.states.get(key, key)


def trend_svgs(rows: list[dict], changes: list[dict], languages: list[Labels]) -> list[str]:
    """One chart of ``rows`` per entry of ``languages``: the geometry (scales, positions, thinning,
    whiskers and lines: most of a chart's time) is worked out once; numbers, names and tooltips are
    written in each language."""
    points = _points(rows)
    height = _TOP + PLOT_HEIGHT_PX + _BOTTOM
    if not points:
        return [_frame(height, lab) + f'<text x="{_LEFT}" y="{_TOP + 20}">—</text></svg>' for lab in languages]
    scale = _Scale.of(points)
    # ``out``: the chart's parts in order, each text (the same in every language) or a function of the
    # language's labels and number format
    out: list = []
    _axes(out, scale, height)
    for c in changes:  # a condition changed at this run
        x = _seconds(c.get("date"))
        if x is not None and scale.x_lo <= x <= scale.x_hi:
            out.append(f'<line x1="{scale.sx(x):.1f}" x2="{scale.sx(x):.1f}" y1="{_TOP}" y2="{_BOTTOM_Y}" '
                       f'stroke="#666666" stroke-dasharray="4 3"/>')
    cells: dict = {}
    for p in points:
        cells.setdefault(p[4]["cell"], []).append(p)
    colour = {cell: _COLOURS[i % len(_COLOURS)] for i, cell in enumerate(cells)}
    states = [s for s in dict.fromkeys(p[4]["state"] for p in points if not p[4]["usable"])]
    shape = {s: _SHAPES[i % len(_SHAPES)] for i, s in enumerate(states)}
    dense = len(points) > 600  # a year of nightly runs: thinner marks, so the level stays readable
    for cell in cells:
        _cell_marks(out, _thinned(sorted(cells[cell], key=lambda p: p[0])), scale, colour[cell], shape, dense)
    ly = _legend(out, cells, colour, states, shape)
    h = ly + 12 if ly + 12 > height else height  # many cells: the legend, not the plot, sets the height
    out.append("</svg>")
    drawn = []
    for lab in languages:
        num = formatter(lab.L)
        drawn.append(_frame(h, lab) + "".join([part if type(part) is str else part(lab, num) for part in out]))
    return drawn


_WIDTH = _LEFT + PLOT_WIDTH_PX + _LEGEND
_BOTTOM_Y = _TOP + PLOT_HEIGHT_PX


def _points(rows: list[dict]) -> list[tuple]:
    """(x in seconds, median, low, high, row) of each row with a date and a finite median; a missing or
    non-finite bound is the median, and a bound is never on the wrong side of it."""
    points = []
    for r in rows:
        x = _seconds(r.get("date"))
        m = r.get("median")
        if x is None or not (type(m) is float or _finite(m)) or not math.isfinite(m):
            continue
        low, high = r.get("low"), r.get("high")
        low = low if (type(low) is float and math.isfinite(low)) or _finite(low) else m
        high = high if (type(high) is float and math.isfinite(high)) or _finite(high) else m
        points.append((x, m, low if low < m else m, high if high > m else m, r))
    return points


def _frame(h: int, lab: Labels) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{h}" '
            f'viewBox="0 0 {_WIDTH} {h}" role="img" aria-label={quoteattr(lab.title)} '
            f'font-family="sans-serif" font-size="11">'
            f'<rect width="{_WIDTH}" height="{h}" fill="white"/>'
            f'<text x="{_LEFT}" y="18" font-size="13" font-weight="bold">{escape(lab.title)}</text>')


@dataclass(frozen=True)
class _Scale:
    """The plot's ranges: dates across (padded), the y ticks' range up."""

    x_lo: float
    x_hi: float
    ticks: list[float]

    @classmethod
    def of(cls, points: list[tuple]) -> "_Scale":
        xs = [p[0] for p in points]
        x_lo, x_hi = min(xs), max(xs)
        if x_hi - x_lo < 1:
            x_lo, x_hi = x_lo - 86400, x_hi + 86400
        pad = (x_hi - x_lo) * 0.02  # the first and last run's marks inside the plot, not on its edge
        return cls(x_lo - pad, x_hi + pad, nice_ticks(min(p[2] for p in points), max(p[3] for p in points)))

    @property
    def y_lo(self) -> float:
        return self.ticks[0]

    @property
    def y_hi(self) -> float:
        return self.ticks[-1]

    def sx(self, v: float) -> float:
        return _LEFT + (v - self.x_lo) / (self.x_hi - self.x_lo) * PLOT_WIDTH_PX

    def sy(self, v: float) -> float:
        return _TOP + PLOT_HEIGHT_PX - (v - self.y_lo) / (self.y_hi - self.y_lo) * PLOT_HEIGHT_PX


def _axes(out: list, scale: _Scale, height: int) -> None:
    """The axes: y ticks with grid, x ticks as dates, and both titles."""
    bottom = _BOTTOM_Y
    digits = _digits(scale.ticks)
    for t in scale.ticks:
        y = scale.sy(t)
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + PLOT_WIDTH_PX}" y1="{y:.1f}" y2="{y:.1f}" stroke="#dddddd"/>'
                   f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">')
        out.append(lambda lab, num, t=t: escape(num(t, digits)))
        out.append("</text>")
    for i in range(6):
        v = scale.x_lo + (scale.x_hi - scale.x_lo) * i / 5
        x = scale.sx(v)
        label = datetime.fromtimestamp(v, tz=timezone.utc).strftime("%Y-%m-%d")
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 5}" stroke="#444444"/>'
                   f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="end" '
                   f'transform="rotate(-30 {x:.1f} {bottom + 16})">{label}</text>')
    out.append(f'<line x1="{_LEFT}" x2="{_LEFT + PLOT_WIDTH_PX}" y1="{bottom}" y2="{bottom}" stroke="#444444"/>'
               f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{bottom}" stroke="#444444"/>'
               f'<text x="{_LEFT + PLOT_WIDTH_PX / 2}" y="{height - 6}" text-anchor="middle">')
    out.append(lambda lab, num: escape(lab.L.gettext("run date")))
    out.append(f'</text><text transform="translate(14 {_TOP + PLOT_HEIGHT_PX / 2}) rotate(-90)" '
               f'text-anchor="middle">')
    out.append(lambda lab, num: escape(lab.axis_title))
    out.append("</text>")


def _cell_marks(out: list, ps: list[tuple], scale: _Scale, col: str, shape: dict, dense: bool) -> None:
    """One cell's whiskers, its line through the usable points and a mark per point."""
    bottom, x_lo, y_lo = _BOTTOM_Y, scale.x_lo, scale.y_lo
    kx, ky = PLOT_WIDTH_PX / (scale.x_hi - x_lo), PLOT_HEIGHT_PX / (scale.y_hi - y_lo)
    # each point's position as text once (sx, sy inline): a year of runs draws thousands per chart
    fx = [f"{_LEFT + (p[0] - x_lo) * kx:.1f}" for p in ps]
    fm = [f"{bottom - (p[1] - y_lo) * ky:.1f}" for p in ps]
    whisker = f'" stroke="{col}" stroke-width="{1 if dense else 2}" opacity="0.6"/>'
    out.append("".join([f'<line x1="{x}" x2="{x}" y1="{bottom - (p[2] - y_lo) * ky:.1f}" '
                        f'y2="{bottom - (p[3] - y_lo) * ky:.1f}{whisker}' for x, p in zip(fx, ps)]))
    line = " ".join(f"{x},{y}" for x, y, p in zip(fx, fm, ps) if p[4]["usable"])
    if line:
        out.append(f'<polyline points="{line}" fill="none" stroke="{col}" stroke-width="1"/>')
    for tx, ty, (x, m, _, _, r) in zip(fx, fm, ps):
        if r["usable"] and dense:  # no tooltip per mark: thousands of them would only weigh the file
            out.append(f'<circle cx="{tx}" cy="{ty}" r="2" fill="{col}"/>')
            continue
        if r["usable"]:
            mark = ("circle", scale.sx(x), scale.sy(m), col, col)
        else:
            mark = (shape[r["state"]], scale.sx(x), scale.sy(m), _GREY, "white")

        def tip(lab, num, r=r, m=m) -> str:
            return f"{lab.cell(r['cell'])}: {num(m, 1)}" + (
                f" · {lab.L.gettext('run')} {r['run']}" if r.get("run") else "")

        out.append(lambda lab, num, mark=mark, tip=tip: _marker(*mark, tip(lab, num)))


def _legend(out: list, cells: dict, colour: dict, states: list, shape: dict) -> int:
    """The legend: the cells' colours, then the states that cannot carry a step; returns its last line's y."""
    lx, ly = _LEFT + PLOT_WIDTH_PX + 16, _TOP + 4
    out.append(f'<text x="{lx}" y="{ly}" font-weight="bold">')
    out.append(lambda lab, num: escape(lab.L.gettext("cell")))
    out.append("</text>")
    for cell in cells:
        ly += 16
        out.append(f'<circle cx="{lx + 5}" cy="{ly - 4}" r="4" fill="{colour[cell]}"/><text x="{lx + 14}" y="{ly}">')
        out.append(lambda lab, num, cell=cell: f"<title>{escape(lab.cell(cell))}</title>{escape(_short(lab.cell(cell)))}")
        out.append("</text>")
    for s in states:
        ly += 16
        out.append(_marker(shape[s], lx + 5, ly - 4, _GREY, "white") + f'<text x="{lx + 14}" y="{ly}">')
        out.append(lambda lab, num, s=s: f"<title>{escape(lab.state(s))}</title>{escape(_short(lab.state(s)))}")
        out.append("</text>")
    return ly
