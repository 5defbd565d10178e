"""A trend chart: one metric of one model over the runs' dates, a line per cell, as offline SVG.

Points that may not carry a step (interrupted runs, unstable cells, cells
without a valid sample) are drawn hollow in grey; a dashed rule marks each
run whose conditions differ from the run before it. The page prints the
same figures as a table, each linked to its run.
"""

from __future__ import annotations

import altair as alt

from .. import charts
from ..i18n import Lang
from .series import OK

_WIDTH = 560


def trend_rows(page_series: list[dict], metric: str, L: Lang) -> list[dict]:
    """One row per point with a figure for ``metric``: raw values (the table rounds them once)."""
    rows = []
    for s in page_series:
        label = charts._label(L.gettext(s["prompt_class"]) + " · "
                              + (L.gettext("reasoning on") if s["reasoning"] else L.gettext("reasoning off")))
        for p in s["points"]:
            sp = p["spread"].get(metric)
            if sp is None:
                continue
            rows.append({"date": p["started_at"], "median": sp.median, "low": sp.low, "high": sp.high,
                         "n": sp.n, "run": p["run_id"], "cell": label, "usable": p["state"] == OK,
                         "state": charts._label(L.gettext("usable") if p["state"] == OK else L.gettext(p["state"]))})
    return rows


def bench_rows(points: list[dict], L: Lang) -> list[dict]:
    """llama-bench points (report/history/llama_bench.py) as lines of their own, labelled with their test."""
    kind = charts._label(L.gettext("llama-bench (in-process)"))
    return [{"date": p["date"], "median": p["spread"].median, "low": p["spread"].low, "high": p["spread"].high,
             "n": p["spread"].n, "run": None, "cell": charts._label(f"llama-bench {p['test']}"), "usable": True,
             "state": kind} for p in points]


def change_rows(page_series: list[dict]) -> list[dict]:
    """Dates at which a stored condition changed (once per run, whichever cell noticed it)."""
    seen = {}
    for s in page_series:
        for p in s["points"]:
            if p["changes"] and p["run_id"] not in seen:
                seen[p["run_id"]] = {"date": p["started_at"], "run": p["run_id"]}
    return list(seen.values())


def trend_chart(rows: list[dict], changes: list[dict], L: Lang, title: str, axis_title: str):
    """The chart as SVG text (or a deferred render inside ``charts.deferred``)."""
    base = alt.Chart(alt.Data(values=rows))
    # numeric dates: the same in both languages, with no month names left in English
    x = alt.X("date:T", title=L.gettext("run date"), axis=alt.Axis(format="%Y-%m-%d", labelAngle=-30))
    y_scale = alt.Scale(zero=False)
    color = alt.Color("cell:N", title=L.gettext("cell"), sort=None)
    whisker = base.mark_rule(strokeWidth=2, opacity=0.6).encode(x=x, y=alt.Y("low:Q", title=axis_title, scale=y_scale),
                                                                 y2="high:Q", color=color)
    line = base.transform_filter("datum.usable").mark_line(strokeWidth=1).encode(x=x, y="median:Q", color=color)
    # a point that cannot carry a step: hollow and grey, still in its place on the date axis
    dots = base.mark_point(size=60, strokeWidth=2, opacity=1).encode(
        x=x, y=alt.Y("median:Q", scale=y_scale), color=alt.condition("datum.usable", color, alt.value("#888888")),
        fill=alt.condition("datum.usable", color, alt.value("white")),
        shape=alt.Shape("state:N", title=None, sort=None))
    layers = [whisker, line, dots]
    if changes:
        layers.append(alt.Chart(alt.Data(values=changes)).mark_rule(strokeDash=[4, 3], color="#666666").encode(
            x=alt.X("date:T")))
    chart = alt.layer(*layers).properties(width=_WIDTH, height=220, title=charts._label(title))
    return charts._svg(chart.configure_axis(labelLimit=240), L)
