"""A German page's charts speak German to a screen reader: each SVG is one image named by a description in
the page's language with the figures rounded as the page rounds them, never Vega's English labels
("X-axis titled …", "high: 125.033491114")."""

from __future__ import annotations

import re
from types import SimpleNamespace as NS

import pytest

from cardproof.report import axes_charts, charts
from cardproof.report.chart_draw import accessible
from cardproof.report.history.svg import trend_svg
from cardproof.report.i18n import Lang

DE = Lang("de")
_ENGLISH = ("X-axis titled", "Y-axis titled", "model:", "high:", "low:", "class:", "median:", "legend", "Title text",
            "mark container", "Chart:")
_ATTR = re.compile(r'(?:aria-[a-z]+|description)="([^"]*)"|<title>(.*?)</title>|<desc>(.*?)</desc>', re.S)
# a figure with three or more decimals (German: a decimal comma); KL divergences are read apart below
_LONG = re.compile(r"(?<![\w.,])\d[\d.]*,\d{3,}")


def _labels(svg: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in _ATTR.finditer(svg)]


def _decode_rows():
    return [{"model": "m1", "class": "kurz", "median": 125.033491114, "low": 120.1234567, "high": 130.98765432,
             "n": 5, "cell": 1, "unstable": False, "stability": "stabil"},
            {"model": "m2", "class": "kurz", "median": 99.5, "low": 98.1, "high": 101.2, "n": 5, "cell": 2,
             "unstable": True, "stability": "instabil"}]


def _spread(p50, p90=None):
    return NS(p50=p50, p90=p90 if p90 is not None else p50 * 1.2, min=p50 * 0.9, max=p50 * 1.1)


def _load_entry():
    rows = [{"x": x, "f": NS(output_tps=30.123456 * x, decode_tps=_spread(30.987654 / x ** 0.2),
                             requests_per_s=0.51234 * x, ttft_ms=_spread(120.3333 * x))} for x in (1, 2, 4)]
    return {"rows": rows, "knee": 2}


CHARTS = {
    "decode": lambda: charts.decode_chart(_decode_rows(), DE, title="Decode"),
    "reasoning": lambda: charts.reasoning_chart(
        [{"model": "m1", "class": "kurz", "off": 50.0, "on": 40.0, "delta": -0.2000123, "measurable": True,
          "cell_off": 1, "cell_on": 2}], DE, title="Reasoning"),
    "deviation": lambda: charts.deviation_chart(
        [{"model": "m1", "prompt_class": "short", "reasoning": False, "deviation": 0.0812345,
          "beyond_spread": True}], DE),
    "memory": lambda: charts.memory_chart(
        [{"model": "m1", "item": "Gewichte", "gib": 4.123456, "order": 0, "selfreport": 4.5678},
         {"model": "m1", "item": "KV-Cache", "gib": 1.0009876, "order": 1, "selfreport": 4.5678}], DE),
    "quality": lambda: charts.quality_chart(
        [{"model": "q4", "kld": 0.0123456, "decode": 90.123456, "mib": 4812.3456, "front": True},
         {"model": "q8", "kld": 0.0012345, "decode": 70.98765, "mib": 8123.4567, "front": False}], DE),
    "load": lambda: axes_charts.load_chart(_load_entry(), None, DE, "m1 · Last"),
    "rate": lambda: axes_charts.load_chart(_load_entry() | {"knee": None}, None, DE, "m1 · Raten", "rate"),
    "depth": lambda: axes_charts.depth_chart(
        [{"tokens": t, "what": w, "value": v} for t in (40, 2048.5, 8192)
         for w, v in (("Decode Tok./s", 100.123456 - t / 100), ("Prefill Tok./s", 2000.987654))], DE, "m1 · Tiefe"),
}


@pytest.mark.parametrize("kind", sorted(CHARTS))
def test_german_chart_is_one_image_named_in_german(kind):
    svg = CHARTS[kind]()
    labels = _labels(svg)
    assert labels, "the chart has an accessible name"
    for text in labels:
        assert not any(e in text for e in _ENGLISH), (kind, text)
        figures = re.sub(r"KL \d,\d+", "KL", text)  # a divergence in the thousandths keeps 2 significant digits
        assert not _LONG.search(figures), (kind, text)
    root = svg[:svg.index(">", svg.index("<svg"))]
    assert 'role="img"' in root and "Diagramm:" in root, root
    assert re.search(r"\bje\b|gegenüber|→", root), root  # the lead, in German


def test_the_decode_description_carries_the_rounded_figures():
    svg = CHARTS["decode"]()
    assert "m1 · kurz: 125,0 (120,1–131,0)" in svg and "99,5 (98,1–101,2), instabil" in svg


def test_english_chart_is_named_in_english():
    svg = charts.decode_chart(_decode_rows(), Lang("en"), title="Decode")
    root = svg[:svg.index(">", svg.index("<svg"))]
    assert "Chart: Decode" in root and "per model and prompt class" in root and "125.0 (120.1–131.0)" in root


def test_accessible_keeps_a_chart_without_description_as_drawn():
    svg = '<svg a="1"><g role="graphics-object" aria-roledescription="axis"></g></svg>'
    assert accessible(svg, None) == svg
    named = accessible(svg, 'a "b" <c>')
    assert named.startswith("<svg a=\"1\" role=\"img\" aria-label='a \"b\" &lt;c&gt;'><title>a \"b\" &lt;c&gt;</title>")
    assert "aria-roledescription" not in named and "graphics-object" not in named


def test_german_trend_chart_is_named_in_german():
    rows = [{"date": f"2026-06-{d:02d}T02:00:00+00:00", "median": 1000.123456 + d, "low": 990.5555, "high": 1010.4444,
             "n": 5, "run": d, "cell": "kurz · Reasoning aus", "usable": True, "state": "usable"} for d in (1, 2, 3)]
    svg = trend_svg(rows, [], DE, "Decode · m1", "Decode Tok./s")
    for text in _labels(svg):
        assert not any(e in text for e in _ENGLISH), text
        assert not _LONG.search(text), text
