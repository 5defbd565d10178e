"""The decode chart has one colour legend for the prompt class, not a second one for the fill.

Pure chart specification (Altair/Vega-Lite), rendered to SVG with vl-convert
as the site build does: no server is needed to draw two rows.
"""

from __future__ import annotations

import pytest

from cardproof.report import charts
from cardproof.report.i18n import Lang


def _rows():
    return [{"model": m, "class": c, "median": med, "low": med * 0.9, "high": med * (3 if unstable else 1.1), "n": 3,
             "cell": i, "unstable": unstable, "stability": "unstable" if unstable else "stable"}
            for i, (m, c, med, unstable) in enumerate([("tiny-b", "short", 800.0, True), ("tiny-a", "short", 1300.0, False),
                                                       ("tiny-b", "medium", 280.0, False), ("tiny-a", "medium", 430.0, False)])]


def test_fill_repeats_the_class_colour_without_a_legend_of_its_own():
    spec = charts.decode_spec(_rows(), Lang("de"), title="Decode")
    legends = []
    for layer in spec["layer"]:
        for channel, enc in layer["encoding"].items():
            if isinstance(enc, dict) and enc.get("field") == "class" and channel in ("color", "fill", "stroke"):
                legends.append((channel, enc.get("legend", "default")))
    assert ("fill", None) in legends, legends
    assert spec["config"]["legend"]["titleLimit"] >= 200
    svg = charts.decode_chart(_rows(), Lang("de"), title="Decode")
    assert svg.count(">Prompt-Klasse<") == 1, svg.count("Prompt-Klasse")


def test_every_legend_symbol_is_drawn():
    """Each legend entry's symbol has a visible stroke or fill: the stable/unstable symbols were
    drawn white on white with no outline (the mark's white fill for unstable cells reached them)."""
    import re

    svg = charts.decode_chart(_rows(), Lang("en"), title="Decode")
    entries = re.findall(r'role-legend-symbol"[^>]*>(<path[^>]*>)</g><g class="mark-text role-legend-label"[^>]*>'
                         r'<text[^>]*>([^<]+)<', svg)
    labels = {label for _, label in entries}
    assert {"short", "medium", "stable", "unstable"} <= labels, labels
    for path, label in entries:
        stroke = re.search(r'stroke="([^"]+)"', path)
        fill = re.search(r'fill="([^"]+)"', path)
        visible = (stroke and stroke.group(1) not in ("white", "#fff", "#ffffff", "transparent")) or \
                  (fill and fill.group(1) not in ("white", "#fff", "#ffffff", "transparent", "none"))
        assert visible, (label, path)


def test_a_chart_drawn_from_the_same_spec_is_not_drawn_again(tmp_path, monkeypatch):
    """An article rendered again with unchanged charts (a later run moved one of its steps) keeps their files:
    the file's last line names what it was drawn from; another spec or locale, or a file without it, is drawn."""
    import xml.etree.ElementTree as ET

    drawn = []
    real = charts._render
    monkeypatch.setattr(charts, "_render", lambda spec, locale: drawn.append(locale) or real(spec, locale))
    path = tmp_path / "img" / "decode.svg"

    def draw(lang="en", rows=None):
        with charts.deferred(workers=1):
            charts.write_svg(path, charts.decode_chart(rows or _rows(), Lang(lang), title="Decode"))

    draw()
    assert drawn == ["en-US"] and ET.fromstring(path.read_text()).tag.endswith("svg")  # still one XML document
    first = path.stat().st_mtime_ns
    draw()
    assert drawn == ["en-US"] and path.stat().st_mtime_ns == first
    draw("de")
    assert drawn == ["en-US", "de-DE"]
    draw("de", rows=_rows()[:2])
    assert len(drawn) == 3
    path.write_text(path.read_text().rsplit("<!--", 1)[0])  # a file of an older build, without its mark
    charts._DRAWN.clear()  # and a process that has not drawn it
    draw("de", rows=_rows()[:2])
    assert len(drawn) == 4


def test_a_chart_drawn_before_in_this_process_is_written_not_drawn(tmp_path, monkeypatch):
    """A build from scratch beside an incremental one (or the daemon's next build) writes the charts this
    process drew before from their text; a new spec is still drawn, in another language too."""
    drawn = []
    real = charts._render
    monkeypatch.setattr(charts, "_render", lambda spec, locale: drawn.append(locale) or real(spec, locale))
    monkeypatch.setattr(charts, "_DRAWN", type(charts._DRAWN)())

    def draw(path, lang="en", rows=None):
        with charts.deferred(workers=1):
            charts.write_svg(path, charts.decode_chart(rows or _rows(), Lang(lang), title="Decode"))
        return path.read_text()

    first = draw(tmp_path / "a" / "decode.svg")
    assert drawn == ["en-US"]
    assert draw(tmp_path / "b" / "decode.svg") == first and drawn == ["en-US"]  # another project, no drawing
    draw(tmp_path / "b" / "decode.svg", "de")
    draw(tmp_path / "c" / "decode.svg", rows=_rows()[:2])
    assert drawn == ["en-US", "de-DE", "en-US"]


def test_the_run_charts_are_valid_vega_lite_and_the_schema_can_refuse():
    """The decode, load and context specs are built as plain dicts (no Altair objects): each is checked
    against the Vega-Lite schema Altair ships, which refuses a damaged one."""
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema.core import load_schema

    from cardproof.report.axes_charts import depth_spec

    schema = load_schema()
    for lang in ("en", "de"):
        for spec in (charts.decode_spec(_rows(), Lang(lang), title="t"),  # log scale: 280 to 1,300 tok/s
                     charts.decode_spec(_rows()[2:], Lang(lang), axis_title="prefill tok/s"),
                     depth_spec([{"tokens": 10.0, "what": "decode", "value": 5.0}], Lang(lang), "d")):
            validate_jsonschema(spec, schema)
    damaged = charts.decode_spec(_rows(), Lang("en"))
    damaged["layer"][1]["encoding"]["x"]["type"] = "quantity"
    with pytest.raises(Exception, match="quantity"):
        validate_jsonschema(damaged, schema)

