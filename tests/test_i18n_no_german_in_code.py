"""German lives in the catalogue (report/locale/de/LC_MESSAGES/cardproof.po) and nowhere else in the product.

A scan of every .py and .toml file of cardproof/, daemon/ and report/ for
German letters, German quotes, ``_de`` keys, ``german=`` and ``"de":``
dictionaries. What may stay is listed below, each with its reason; a new
German string constant fails here and belongs in the .po.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GERMAN = re.compile(r"[äöüÄÖÜß„]|\b\w+_(?:de|DE)\b|\bgerman\s*=|[\"']de[\"']\s*:")

#: (file, text on the line): why it may hold German
ALLOWED = {
    # glibc's German strsignal texts: a crash line in a German-locale log must be recognised
    ("daemon/store/crashes.py", "ungültiger maschinenbefehl"): "log recognition",
    ("daemon/logs/parsers/crash.py", "Ungültiger Maschinenbefehl"): "log recognition",
    # a language code, not text
    ("report/charts.py", '"de": "de-DE"'): "Vega's locale per page language",
    # a campaign author writes a contradiction in both languages; the code only checks both are there
    ("report/contradictions/authored.py", 'value["de"]'): "authored data",
    # the site's German name and description are settings of the site owner, not text of cardproof
    ("report/site_settings.py", "title_de"): "owner's setting",
    ("report/site_settings.py", "description_de"): "owner's setting",
}


def _product_files():
    for top in ("cardproof", "daemon", "report"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".py", ".toml") and "__pycache__" not in path.parts:
                yield path


def _hits() -> list[str]:
    out = []
    for path in _product_files():
        rel = path.relative_to(ROOT).as_posix()
        allowed = [text for (file, text) in ALLOWED if file == rel]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if GERMAN.search(line) and not any(text in line for text in allowed):
                out.append(f"{rel}:{n}: {line.strip()[:100]}")
    return out


def test_no_german_outside_the_catalogue():
    assert _hits() == []


def test_the_scan_sees_a_german_constant(tmp_path, monkeypatch):
    """The scan is not blind: a German constant in a product file is found."""
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "x.py").write_text('TITLE_DE = "Befunde"\nX = {"de": "Ergebnis für"}\n')
    for top in ("cardproof", "daemon"):
        (tmp_path / top).mkdir()
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert [h.split(":")[1] for h in _hits()] == ["1", "2"]
