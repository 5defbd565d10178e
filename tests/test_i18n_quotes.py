"""German pages quote in German: cardproof's own sentences use „…“, never "…" or “…”; and one German
word per English term where the glossary's own words collide ("Befund" is a finding only)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cardproof.report import build as build_mod
from cardproof.report.build import build
from cardproof.report.findings.base import Finding, Line, Quote
from cardproof.report.findings.show import plain
from cardproof.report.i18n import Lang, read_catalogue

from findings_data import SEED_NINE, make_run

# an English-style pair: straight quotes, or “ opening a quotation that ” closes
_ENGLISH_QUOTES = re.compile(r'"|”|“[^„“”\n]*”')


def _forms(msg):
    return msg.string if isinstance(msg.string, tuple) else (msg.string,)


def test_the_german_catalogue_quotes_with_german_marks():
    bad = [(msg.id, form) for msg in read_catalogue("de") if msg.id for form in _forms(msg)
           if _ENGLISH_QUOTES.search(form)]
    assert bad == []


def test_befund_is_said_of_findings_only():
    """The glossary gives *Befund* to *finding*: a verdict is an *Urteil*, a log's fact an *Angabe*."""
    bad = []
    for msg in read_catalogue("de"):
        ids = msg.id if isinstance(msg.id, tuple) else (msg.id,)
        if msg.id and any("Befund" in f for f in _forms(msg)) and not any(re.search("finding", i, re.I) for i in ids):
            bad.append((ids[0], _forms(msg)[0]))
    assert bad == []
    assert Lang("de").gettext("Fact") == "Angabe"


def test_plain_text_quotes_in_the_languages_marks():
    f = Finding("r", "k", "Title", "{what} was said", {"what": Quote("model loaded")}, (), Line("x"), Line("y"))
    assert "„model loaded“" in plain(f, Lang("de"))
    assert "“model loaded”" in plain(f, Lang("en"))


# what is not cardproof's own sentence: quoted evidence (<q>, <samp>, code), link targets and titles,
# HTML attributes, admonition titles (MkDocs syntax) and stored texts shown as code blocks
_NOT_OURS = [re.compile(p) for p in (r"<q>.*?</q>", r"<samp>.*?</samp>", r"`[^`\n]*`", r"\]\([^)\n]*\)",
                                     r"<[^>\n]*>", r'^\s*(?:!!!|\?\?\?\+?) \w+ "[^"\n]*"')]


def own_sentences(page: str) -> str:
    out, fenced = [], False
    if page.startswith("---\n"):  # the YAML front matter: MkDocs' metadata, not a sentence
        page = page[page.index("\n---", 4) + 4:]
    for line in page.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for pat in _NOT_OURS:
            line = pat.sub(" ", line)
        out.append(line)
    return "\n".join(out)


def test_own_sentences_sees_english_quotes():
    assert _ENGLISH_QUOTES.search(own_sentences('Der Server meldet "model loaded".'))
    assert not _ENGLISH_QUOTES.search(own_sentences('Der Server meldet „model loaded“: <q>"x"</q> `"y"`'))


@pytest.fixture(autouse=True)
def no_mkdocs(monkeypatch):
    monkeypatch.setattr(build_mod, "mkdocs_build", lambda project: Path(project) / "build" / "site")


def test_a_german_article_quotes_in_german(tmp_path):
    rid = make_run(tmp_path / "seed.db", SEED_NINE)
    build(tmp_path / "seed.db", tmp_path / "proj", run_mkdocs=False)
    runs = tmp_path / "proj" / "site" / "runs"
    for name in (f"run-{rid}.de.md", f"run-{rid}-evidence.de.md"):
        text = own_sentences((runs / name).read_text())
        found = [m.group(0) for m in _ENGLISH_QUOTES.finditer(text)]
        assert found == [], (name, found)
