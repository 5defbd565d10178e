"""Charts readers can compare: one scale across reasoning off/on, log past an order of magnitude,
a title on each, the reasoning change bounded by what is possible.

Real parts: the report's own chart code, rendered to SVG by vl-convert (the
renderer the build uses); rows are made here so each case is exact.
"""

from __future__ import annotations

from cardproof.report import charts
from cardproof.report.i18n import Lang


def _rows(*cells):
    return [{"model": m, "class": "short", "median": med, "low": lo, "high": hi, "n": 3, "cell": i,
             "unstable": False, "stability": "stable"} for i, (m, med, lo, hi) in enumerate(cells)]


def _x_scales(spec: dict) -> list[dict]:
    return [layer["encoding"]["x"].get("scale", {}) for layer in spec["layer"]]


def test_reasoning_off_and_on_share_one_domain():
    off, on = _rows(("a", 100, 90, 110)), _rows(("a", 30, 25, 40))
    shared = charts.decode_domain(off, on)
    assert shared == [25, 110]
    for rows in (off, on):
        scales = _x_scales(charts.decode_spec(rows, Lang("en"), "t", shared))
        assert all(s["domain"] == [25, 110] for s in scales), scales


def test_log_scale_past_one_order_of_magnitude_and_the_axis_says_so():
    wide = _rows(("a", 3.0, 2.5, 4.0), ("b", 1300.0, 1000.0, 1400.0))
    spec = charts.decode_spec(wide, Lang("de"), "t")
    assert all(s["type"] == "log" for s in _x_scales(spec))
    assert "logarithmische Skala" in spec["layer"][0]["encoding"]["x"]["title"]
    narrow = _rows(("a", 100, 90, 110), ("b", 300, 250, 320))
    assert all(s["type"] == "linear" for s in _x_scales(charts.decode_spec(narrow, Lang("en"))))


def test_a_log_axis_has_a_labelled_tick_on_each_side_of_every_figure():
    """The demo's decode chart (a tiny model near 1,500 tok/s beside one near 3) had no tick past 900: a
    log axis now runs from the 1-2-5 value below the lowest figure to the one above the highest, with a
    label at each."""
    wide = _rows(("a", 3.0, 2.5, 4.0), ("b", 1480.0, 1300.0, 1520.0))
    spec = charts.decode_spec(wide, Lang("en"), "t")
    assert all(s["domain"] == [2.0, 2000.0] for s in _x_scales(spec))
    for lang, labels in (("en", ["2", "5", "10", "100", "1,000", "2,000"]), ("de", ["2", "5", "10", "100", "1.000", "2.000"])):
        svg = charts.decode_chart(wide, Lang(lang), "t")
        for label in labels:
            assert f">{label}</text>" in svg, (lang, label)


def test_each_chart_has_a_visible_title_in_its_language():
    svg = charts.decode_chart(_rows(("a", 100, 90, 110)), Lang("de"), title="Decode Tok./s, Reasoning aus")
    assert "Decode Tok./s, Reasoning aus" in svg
    rows = [{"model": "a", "class": "short", "off": 100, "on": 20, "delta": -0.8, "measurable": True,
             "cell_off": 1, "cell_on": 2}]
    assert "Reasoning" in charts.reasoning_chart(rows, Lang("de"), title="Änderung mit Reasoning an")


def test_reasoning_change_axis_stops_at_minus_100_percent():
    rows = [{"model": "a", "class": c, "off": 100, "on": on, "delta": on / 100 - 1, "measurable": True,
             "cell_off": 1, "cell_on": 2} for c, on in (("short", 2), ("long", 150))]
    scale = charts.reasoning_spec(rows, Lang("en")).to_dict()["encoding"]["x"]["scale"]
    assert scale["domain"][0] >= -1 and scale["nice"] is False
    svg = charts.reasoning_chart(rows, Lang("en"))
    assert "−400" not in svg and "-400" not in svg and "-200" not in svg
