"""The built German pages hold no English from the catalogue and no decimal point in a number.

Real parts: runs measured against the real llama-server, a real ``mkdocs
build --strict``, the built HTML read as a reader sees its prose. Code,
preformatted text and quotations are left out: quoted evidence (server
errors, log lines, code) stays as it was written. The run also holds a depth
refused beyond the server's context and a log whose capture has a gap (a real
file truncated between two real imports), so the texts the capture side
stores for those are on the pages too.
"""

from __future__ import annotations

import html.parser
import re
from pathlib import Path

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.importer import capture_file
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.i18n import CATALOGUE
from conftest import campaign_text

# 1.5 / 0.05 / 3.14159: a point with other than three digits after it is a decimal point
# (German writes 12.288 for twelve thousand: three digits after a point are a thousands group).
DECIMAL_POINT = re.compile(r"(?<![\d.,])\d+\.(?:\d{1,2}|\d{4,})(?![\d.])")
QUOTED = {"code", "pre", "kbd", "samp", "q", "blockquote", "script", "style", "svg", "head"}


class _Prose(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.depth += tag in QUOTED

    def handle_endtag(self, tag):
        if tag in QUOTED and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def prose(page: Path) -> str:
    """What a reader reads on ``page`` outside code and quotations, whitespace collapsed."""
    p = _Prose()
    p.feed(page.read_text())
    return " ".join(" ".join(p.parts).split())


@pytest.fixture(scope="module")
def german_pages(llama_server, tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("german")
    store = open_store(root / "g.db")
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short",),
                         reasoning=(False, True), reps=2, reps_r=1, max_tokens=8, pinned="tiny-a")
    text = text.replace('name = "test"', 'name = "test"\ncanaries = true')  # canaries carry gate observations
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    # a depth no context window holds is refused before any request, with its reason stored
    text += "\n[depth]\ntokens = [16, 4000000]\nrepetitions = 1\nmax_tokens = 8\n"
    run_id = run_campaign(store, parse_campaign(text, "g.toml"), echo=lambda s: None).run_id
    # the server's log read into the run twice, truncated in between: a capture gap with two byte counts
    log = root / "server.log"
    log.write_bytes(llama_server.log_path.read_bytes()[-200_000:])
    capture_file(store, log, run_id=run_id)
    log.write_bytes(log.read_bytes()[:1_500])
    assert capture_file(store, log, run_id=run_id)["gaps"] == 1
    store.close()
    site = build(root / "g.db", root / "proj")["site_dir"]
    pages = {p.relative_to(site / "de").as_posix(): prose(p) for p in (site / "de").rglob("*.html")}
    assert any(name.startswith("runs/run-") for name in pages)
    return pages


def test_prose_helper_skips_quoted_text(tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<p>Median 1,5 Tok./s <code>took 0.05 s</code></p><pre>x = 2.5</pre><p>sonst 3.14</p>")
    text = prose(page)
    assert "0.05" not in text and "2.5" not in text
    assert DECIMAL_POINT.findall(text) == ["3.14"]
    assert DECIMAL_POINT.findall("12.288 Token, 1.289,4 Tok./s") == []


def english_runs(catalogue: dict[str, str]) -> set[str]:
    """The English a German page must not show: every catalogue text translated differently, and of
    a text with fields ({n}, %(num)s) each run of four words or more between its fields (a stored
    message said in English still shows those)."""
    runs = set()
    for m, de in catalogue.items():
        if m == de:
            continue
        for part in re.split(r"\{[^{}]*\}|%\([a-z_]+\)s", m):
            part = part.strip(" .,:;()")
            if len(part.split()) >= (3 if part == m.strip(" .,:;()") else 4) and part not in de:
                runs.add(part)
    return runs


def test_english_runs_include_the_words_between_fields():
    runs = english_runs({"file truncated from {a:,} to {b:,} bytes now and then": "x",
                         "{n} of {t} requests failed with the same error": "y", "CUDA": "CUDA"})
    assert "requests failed with the same error" in runs and "bytes now and then" in runs
    assert not any("CUDA" in r for r in runs) and "to" not in runs


def test_no_catalogue_english_on_german_pages(german_pages):
    """An English catalogue text (three words or more, translated differently; four between the
    fields of a message with values) in German prose means a string bypassed the translation."""
    english = english_runs(CATALOGUE)
    assert len(english) > 100
    found = [(page, m) for page, text in german_pages.items() for m in english if m in text]
    assert found == []


def test_stored_reasons_are_german_with_german_numbers(german_pages):
    """The refused depth and the capture gap are said in German with German thousands."""
    text = " ".join(german_pages.values())
    assert "Tiefe 4.000.000 Token + 8 erzeugte Token übersteigen den Kontext des Servers" in text
    assert re.search(r"Datei von [\d.]+ auf 1\.500 Byte gekürzt", text)


def test_no_decimal_point_in_german_prose(german_pages):
    found = [(page, n) for page, text in german_pages.items() for n in DECIMAL_POINT.findall(text)]
    assert found == []


def test_the_drivers_own_words_are_quoted_not_prose(german_pages):
    """Why there is no card (NVML's error) is evidence: shown as code, never as German prose's English."""
    found = [page for page, text in german_pages.items() if "NVMLError" in text or "Shared Library" in text]
    assert found == []
