"""A trend chart: one metric of one model over the runs' dates, a line per cell, as offline SVG.

Points that may not carry a step (interrupted runs, unstable cells, cells
without a valid sample) are drawn hollow in grey; a dashed rule marks each
run whose conditions differ from the run before it (svg.py draws it). The page prints the
same figures as a table, each linked to its run.
"""

from __future__ import annotations

from cardproof.marks import NP_

from .. import charts
from ..i18n import Lang
from . import svg
from ...daemon.load.stats import rate_digits
from .series import OK


#: a load cell's first words: a count meets a noun
LOAD_STREAMS = NP_("load: {n} stream", "load: {n} streams")


def cell_label(s: dict, L: Lang) -> str:
    """The cell's name as plain text for a chart (the page's heading is the same words as Markdown)."""
    kind = s.get("kind", "measure")
    if kind == "load":
        first = L.plural(LOAD_STREAMS, s["streams"]).format(n=L.num(s["streams"], 0))
    elif kind == "depth":
        first = L.gettext("depth {tokens} tokens").format(tokens=L.num(s["depth_tokens"], 0))
    elif kind == "rate":
        first = L.gettext("{rate} requests/s").format(rate=L.num(s["rate_rps"], rate_digits(s["rate_rps"])))
    else:
        return (L.gettext(s["prompt_class"]) + " · "
                + (L.gettext("reasoning on") if s["reasoning"] else L.gettext("reasoning off")))
    return first + " · " + L.gettext(s["prompt_class"])


def trend_rows(page_series: list[dict], metric: str) -> list[dict]:
    """One row per point with a figure for ``metric``: raw values (the table rounds them once), the same
    in every language. A row's ``cell`` is its series' place on the page and its ``state`` the point's
    state: keys into each language's names (``labels``)."""
    rows = []
    for i, s in enumerate(page_series):
        for p in s["points"]:
            sp = p["spread"].get(metric)
            if sp is None:
                continue
            state = p["state"]
            rows.append({"date": p["started_at"], "median": sp.median, "low": sp.low, "high": sp.high,
                         "n": sp.n, "run": p["run_id"], "cell": i, "usable": state == OK, "state": state})
    return rows


def names(page_series: list[dict], L: Lang) -> tuple[dict, dict]:
    """``L``'s names for the keys of ``trend_rows`` and ``bench_rows``: (cells, states)."""
    cells: dict = {i: charts._label(cell_label(s, L)) for i, s in enumerate(page_series)}
    states: dict = {}
    for s in page_series:
        for p in s["points"]:
            state = p["state"]
            if state not in states:  # its text is foreign where a merge stored it
                states[state] = charts._label(L.gettext("usable") if state == OK else L.gettext(state))
    states[_BENCH] = charts._label(L.gettext("llama-bench (in-process)"))
    return cells, states


def labels(L: Lang, title: str, axis_title: str, names_: tuple[dict, dict]) -> svg.Labels:
    """One chart's words in ``L``: its title and axis title, and ``names`` (of the page, in ``L``)."""
    return svg.Labels(L, charts._label(title), axis_title, *names_)


_BENCH = ("llama-bench",)  # the state key of llama-bench rows: no point's state is a tuple


def bench_rows(points: list[dict]) -> list[dict]:
    """llama-bench points (report/history/llama_bench.py) as lines of their own, labelled with their test."""
    return [{"date": p["date"], "median": p["spread"].median, "low": p["spread"].low, "high": p["spread"].high,
             "n": p["spread"].n, "run": None, "cell": charts._label(f"llama-bench {p['test']}"), "usable": True,
             "state": _BENCH} for p in points]


def change_rows(page_series: list[dict]) -> list[dict]:
    """Dates at which a stored condition changed (once per run, whichever cell noticed it)."""
    seen = {}
    for s in page_series:
        for p in s["points"]:
            if p["changes"] and p["run_id"] not in seen:
                seen[p["run_id"]] = {"date": p["started_at"], "run": p["run_id"]}
    return list(seen.values())


def trend_charts(rows: list[dict], changes: list[dict], languages: list[svg.Labels]) -> list[str]:
    """The chart in each language as SVG text, drawn directly (report/history/svg.py: no Vega-Lite
    validation or rendering), its geometry worked out once."""
    return svg.trend_svgs(rows, changes, languages)
