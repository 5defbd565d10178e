"""The decode chart has one colour legend for the prompt class, not a second one for the fill.

Pure chart specification (Altair/Vega-Lite), rendered to SVG with vl-convert
as the site build does: no server is needed to draw two rows.
"""

from __future__ import annotations

from cardproof.report import charts
from cardproof.report.i18n import Lang


def _rows():
    return [{"model": m, "class": c, "median": med, "low": med * 0.9, "high": med * (3 if unstable else 1.1), "n": 3,
             "cell": i, "unstable": unstable, "stability": "unstable" if unstable else "stable"}
            for i, (m, c, med, unstable) in enumerate([("tiny-b", "short", 800.0, True), ("tiny-a", "short", 1300.0, False),
                                                       ("tiny-b", "medium", 280.0, False), ("tiny-a", "medium", 430.0, False)])]


def test_fill_repeats_the_class_colour_without_a_legend_of_its_own():
    spec = charts.decode_spec(_rows(), Lang("de"), title="Decode").to_dict()
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
    draw("de", rows=_rows()[:2])
    assert len(drawn) == 4


def test_a_decode_charts_spec_is_built_once_per_content_and_language(monkeypatch):
    """The same rows, labels and language give the spec built the first time (Altair is not asked again);
    another language, other rows or a changed value build a new one, equal to what Altair makes."""
    charts._SPECS.clear()
    built = []
    real = charts.decode_spec
    monkeypatch.setattr(charts, "decode_spec", lambda *a, **k: built.append(a[1].code) or real(*a, **k))
    monkeypatch.setattr(charts, "_pending", None)
    monkeypatch.setattr(charts, "_render", lambda spec, locale: spec)  # the spec text, not its drawing
    en, de = Lang("en"), Lang("de")
    first = charts.decode_chart(_rows(), en, title="t")
    assert charts.decode_chart(_rows(), en, title="t") == first and built == ["en"]
    other = charts.decode_chart(_rows(), de, title="t")
    assert built == ["en", "de"] and other != first
    changed = _rows()
    changed[0] = dict(changed[0], median=changed[0]["median"] + 1)
    assert charts.decode_chart(changed, en, title="t") != first and built == ["en", "de", "en"]
    assert first == charts._spec_text(real(_rows(), en, "t"))
