"""Charts of the article's Load and Context sections (their figures: axes.py).

A view (axes.py) is data a query layer can hand to any page; drawing it needs
Altair and the site's chart style (charts.py), which sit a layer above.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt

from cardproof.daemon.campaign.tables.load import Slo

from . import charts
from .i18n import Lang


def _load_rows(entry: dict, L: Lang, axis: str = "load") -> list[dict]:
    """Chart rows of one model's steps: ``x`` is streams (``load``) or offered requests/s (``rate``)."""
    rows = []
    for r in entry["rows"]:
        f = r["f"]
        if r["x"] is None:
            continue
        for what, value in ((L.gettext("aggregate output tok/s"), f.output_tps),
                            (L.gettext("per-request decode tok/s (median)"), f.decode_tps.p50)):
            if value is not None:
                rows.append({"x": r["x"], "what": charts._label(what), "value": value, "panel": "tps"})
        if axis == "rate":
            for what, value in ((L.gettext("offered requests/s"), r["x"]),
                                (L.gettext("answered requests/s"), f.requests_per_s)):
                if value is not None:
                    rows.append({"x": r["x"], "what": charts._label(what), "value": value, "panel": "rps"})
        for what, value in ((L.gettext("TTFT p50 ms"), f.ttft_ms.p50), (L.gettext("TTFT p90 ms"), f.ttft_ms.p90)):
            if value is not None:
                rows.append({"x": r["x"], "what": charts._label(what), "value": value, "panel": "ttft"})
    return rows


def load_chart(entry: dict, slo: Slo | None, L: Lang, title: str, axis: str = "load"):
    """Throughput (aggregate and per request) and TTFT against streams or offered rate; SLO and knee as rules.

    Rate steps get a middle panel: answered requests/s beside the offered rate.
    """
    rows = _load_rows(entry, L, axis)
    xs = sorted({r["x"] for r in rows})
    if axis == "rate":
        x = alt.X("x:Q", title=L.gettext("offered requests/s (Poisson arrivals)"), scale=alt.Scale(type="log"),
                  axis=alt.Axis(values=xs, format="~g"))
    else:
        x = alt.X("x:Q", title=L.gettext("concurrent streams"), scale=alt.Scale(type="log", base=2),
                  axis=alt.Axis(values=xs, format="d"))
    base = alt.Chart(alt.Data(values=rows))

    def panel(name: str, unit: str, scale: alt.Scale | None = None):
        return base.transform_filter(f"datum.panel == '{name}'").mark_line(point=True).encode(
            x=x, y=alt.Y("value:Q", title=L.gettext(unit), scale=scale or alt.Undefined),
            color=alt.Color("what:N", title=None, sort=None))

    marks_tps, marks_ttft = [panel("tps", "tok/s")], [panel("ttft", "ms")]
    if entry["knee"] is not None:
        marks_tps.append(alt.Chart(alt.Data(values=[{"x": entry["knee"]}])).mark_rule(
            strokeDash=[4, 3], color="grey").encode(x="x:Q"))
    if slo and slo.per_user_decode_tps is not None:
        marks_tps.append(alt.Chart(alt.Data(values=[{"v": slo.per_user_decode_tps}])).mark_rule(color="firebrick")
                         .encode(y="v:Q"))
    if slo and slo.ttft_p90_ms is not None:
        marks_ttft.append(alt.Chart(alt.Data(values=[{"v": slo.ttft_p90_ms}])).mark_rule(color="firebrick")
                          .encode(y="v:Q"))
    parts = [alt.layer(*marks_tps).properties(width=charts._WIDTH, height=160)]
    if axis == "rate":
        # log: an answered rate far below the offered one stays readable beside it
        parts.append(panel("rps", "requests/s", alt.Scale(type="log")).properties(width=charts._WIDTH, height=120))
    parts.append(alt.layer(*marks_ttft).properties(width=charts._WIDTH, height=140))
    x_title = L.gettext("offered requests/s (Poisson arrivals)") if axis == "rate" else L.gettext("concurrent streams")
    return charts._svg(alt.vconcat(*parts).resolve_scale(color="independent")
                       .properties(title=charts._label(title), description=_description(L, title, x_title, rows)), L)


def _description(L: Lang, title: str, x_title: str, rows: list[dict]) -> str:
    """What a Load or Context chart shows, each line's figures at each step, rounded as the tables round them."""
    lines: dict[str, list[str]] = {}
    for r in rows:
        x = r.get("x", r.get("tokens"))
        lines.setdefault(r["what"], []).append(f"{L.num(x, 0 if float(x).is_integer() else 2)}: "
                                               f"{L.num(r['value'])}")
    items = [f"{what} ({x_title} → {', '.join(points)})" for what, points in lines.items()]
    return charts.describe(L, charts._label(title), items)


def depth_rows(entry: dict, L: Lang) -> list[dict]:
    rows = []
    for f in entry["rows"]:
        if f.prompt_tokens.p50 is None:
            continue
        for what, value in ((L.gettext("decode tok/s"), f.decode_tps.p50),
                            (L.gettext("prefill tok/s"), f.prefill_tps.p50)):
            if value is not None:
                rows.append({"tokens": f.prompt_tokens.p50, "what": charts._label(what), "value": value})
    return rows


def depth_chart(rows: list[dict], L: Lang, title: str):
    """Decode and prefill tok/s (medians) against the prompt's real length in tokens."""
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("tokens:Q", title=L.gettext("prompt tokens (the server's count)")),
        y=alt.Y("value:Q", title=L.gettext("tok/s (median)")),
        color=alt.Color("what:N", title=None, sort=None),
    ).properties(width=charts._WIDTH, height=180, title=charts._label(title),
                 description=_description(L, title, L.gettext("prompt tokens (the server's count)"), rows))
    return charts._svg(chart, L)


def axes_charts(axes: dict | None, run_id: int, L: Lang, img_dir: Path | None) -> dict:
    """Write the Load and Context charts of a run for ``L``; the file names by model position."""
    out: dict = {"load": {}, "rate": {}, "depth": {}}
    if not axes:
        return out
    for axis, heading in (("load", "Load: concurrent streams"), ("rate", "Load: Poisson request rates")):
        for i, entry in enumerate(axes.get(axis, [])):
            if not _load_rows(entry, L, axis):
                continue
            name = f"run-{run_id}-{axis}-{i}-{L.code}.svg"
            if img_dir is not None:
                title = f"{entry['model']} · " + L.gettext(heading)
                charts.write_svg(img_dir / name, load_chart(entry, axes["slo"], L, title, axis))
            out[axis][entry["model"]] = f"img/{name}"
    for i, entry in enumerate(axes["depth"]):
        name = f"run-{run_id}-context-{i}-{L.code}.svg"
        rows = depth_rows(entry, L)
        if not rows:
            continue
        if img_dir is not None:
            charts.write_svg(img_dir / name, depth_chart(rows, L, f"{entry['model']} · " + L.gettext("Context depth")))
        out["depth"][entry["model"]] = f"img/{name}"
    return out
