"""Charts of the article's Load and Context sections (their figures: axes.py).

A view (axes.py) is data a query layer can hand to any page; drawing it needs
Altair and the site's chart style (charts.py), which sit a layer above.
"""

from __future__ import annotations

from pathlib import Path

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


def load_spec(entry: dict, slo: Slo | None, L: Lang, title: str, axis: str = "load") -> dict:
    """Throughput (aggregate and per request) and TTFT against streams or offered rate; SLO and knee as rules.

    Rate steps get a middle panel: answered requests/s beside the offered rate. A plain Vega-Lite dict, as
    charts.decode_spec is (Altair's objects cost most of an article's build); tests/test_report.py validates it.
    """
    rows = _load_rows(entry, L, axis)
    xs = sorted({r["x"] for r in rows})
    if axis == "rate":
        x = {"axis": {"format": "~g", "values": xs}, "field": "x", "scale": {"type": "log"},
             "title": L.gettext("offered requests/s (Poisson arrivals)"), "type": "quantitative"}
    else:
        x = {"axis": {"format": "d", "values": xs}, "field": "x", "scale": {"base": 2, "type": "log"},
             "title": L.gettext("concurrent streams"), "type": "quantitative"}

    def panel(name: str, unit: str, scale: dict | None = None) -> dict:
        y = {"field": "value", **({"scale": scale} if scale else {}), "title": L.gettext(unit), "type": "quantitative"}
        return {"data": {"values": rows}, "mark": {"type": "line", "point": True},
                "encoding": {"color": {"field": "what", "sort": None, "title": None, "type": "nominal"}, "x": x,
                             "y": y},
                "transform": [{"filter": f"datum.panel == '{name}'"}]}

    def rule(field: str, value: float, **mark) -> dict:
        return {"data": {"values": [{field: value}]}, "mark": {"type": "rule", **mark},
                "encoding": {field if field == "x" else "y": {"field": field, "type": "quantitative"}}}

    marks_tps, marks_ttft = [panel("tps", "tok/s")], [panel("ttft", "ms")]
    if entry["knee"] is not None:
        marks_tps.append(rule("x", entry["knee"], color="grey", strokeDash=[4, 3]))
    if slo and slo.per_user_decode_tps is not None:
        marks_tps.append(rule("v", slo.per_user_decode_tps, color="firebrick"))
    if slo and slo.ttft_p90_ms is not None:
        marks_ttft.append(rule("v", slo.ttft_p90_ms, color="firebrick"))
    parts = [{"layer": marks_tps, "height": 160, "width": charts._WIDTH}]
    if axis == "rate":
        # log: an answered rate far below the offered one stays readable beside it
        parts.append({**panel("rps", "requests/s", {"type": "log"}), "height": 120, "width": charts._WIDTH})
    parts.append({"layer": marks_ttft, "height": 140, "width": charts._WIDTH})
    x_title = L.gettext("offered requests/s (Poisson arrivals)") if axis == "rate" else L.gettext("concurrent streams")
    return {"config": {"view": {"continuousWidth": 300, "continuousHeight": 300}}, "vconcat": parts,
            "description": _description(L, title, x_title, rows), "resolve": {"scale": {"color": "independent"}},
            "title": charts._label(title), "$schema": charts.SCHEMA}


def load_chart(entry: dict, slo: Slo | None, L: Lang, title: str, axis: str = "load"):
    """The drawn load_spec (an SVG, or a deferred one while a build draws its charts together)."""
    return charts._svg(load_spec(entry, slo, L, title, axis), L)


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


def depth_spec(rows: list[dict], L: Lang, title: str) -> dict:
    """Decode and prefill tok/s (medians) against the prompt's real length in tokens (a Vega-Lite dict)."""
    x_title = L.gettext("prompt tokens (the server's count)")
    return {"config": {"view": {"continuousWidth": 300, "continuousHeight": 300}},
            "data": {"values": rows}, "mark": {"type": "line", "point": True},
            "description": _description(L, title, x_title, rows),
            "encoding": {"color": {"field": "what", "sort": None, "title": None, "type": "nominal"},
                         "x": {"field": "tokens", "title": x_title, "type": "quantitative"},
                         "y": {"field": "value", "title": L.gettext("tok/s (median)"), "type": "quantitative"}},
            "height": 180, "title": charts._label(title),
            "width": charts._WIDTH, "$schema": charts.SCHEMA}


def depth_chart(rows: list[dict], L: Lang, title: str):
    """The drawn depth_spec."""
    return charts._svg(depth_spec(rows, L, title), L)


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
