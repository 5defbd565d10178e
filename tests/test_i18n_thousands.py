"""Numbers of 1,000 and more carry the locale's thousands separator wherever cardproof prints them:
"context 8,192" / "Kontext 8.192", never "Kontext 8192", in prose and tables of both languages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cardproof.report import build as build_mod
from cardproof.report.build import build

from findings_data import M, make_run, shape


@pytest.fixture(autouse=True)
def no_mkdocs(monkeypatch):
    monkeypatch.setattr(build_mod, "mkdocs_build", lambda project: Path(project) / "build" / "site")


# what is no count: code spans, links' targets and anchors, HTML attributes, dates and times, hashes, ids
_NOT_PROSE = [
    re.compile(r"<samp>.*?</samp>"),  # a log line quoted as the server wrote it
    re.compile(r"`[^`\n]*`"),
    re.compile(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)"),  # a link's target and title
    re.compile(r"<[^>\n]*>"),  # HTML tags and their attributes (span ids)
    re.compile(r"\{#[^}]*\}"),  # attribute lists
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?(?: UTC)?"),
    re.compile(r"\b[0-9a-f]{12,64}\b"),
    re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)"),  # an image's address
    re.compile(r"(?i)\b(?:run|lauf|load|ladevorgang|sample|messung|id|pid|port)\s+\d+\b"),  # ids named as ids
]
_BARE = re.compile(r"(?<![\d.,\u202f\u00a0\w/#-])\d{4,}(?![\d\w])")


def bare_numbers(page: str) -> list[str]:
    """Numbers of four digits or more without a separator in ``page``'s prose and tables, each with its line."""
    out = []
    fenced = False
    for line in page.splitlines():
        if line.lstrip().startswith("```"):  # a stored text shown as code (the frozen campaign)
            fenced = not fenced
            continue
        if fenced:
            continue
        text = line
        for pat in _NOT_PROSE:
            text = pat.sub(" ", text)
        for m in _BARE.finditer(text):
            out.append(f"{m.group(0)} in: {line.strip()[:160]}")
    return out


def test_bare_numbers_sees_what_it_must():
    assert bare_numbers("Kontext 8192 Token") == ["8192 in: Kontext 8192 Token"]
    assert bare_numbers("context 8,192 tokens, `ctx 8192`, [4.096](#step-2048), 2026-06-01") == []


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("thousands")
    m = M("deep", shape("llama", "Q4_K_M", 8.0, bits=4.9, basename="deep", tokenizer="deep"), decode=100.0,
          noise=0.001, depth=[(0, 40, 100.0), (2048, 1814, 3.8)], host=(6000.0, 4700.0, 1024.0, 8192))
    rid = make_run(tmp / "run.db", [m], fit={"deep": [(8192, "fits"), (32768, "does_not_fit")]})
    project = tmp / "proj"
    build(tmp / "run.db", project, run_mkdocs=False)
    runs = project / "site" / "runs"
    return {f"{name}.{lang}": (runs / (f"{name}.md" if lang == "en" else f"{name}.de.md")).read_text()
            for name in (f"run-{rid}", f"run-{rid}-evidence") for lang in ("en", "de")}


@pytest.mark.parametrize("which", ["article.en", "article.de", "evidence.en", "evidence.de"])
def test_counts_of_four_digits_carry_the_separator(pages, which):
    kind, lang = which.split(".")
    page = next(text for name, text in pages.items()
                if name.endswith(f".{lang}") and (name.count("-evidence") == (kind == "evidence")))
    sep = "8,192" if lang == "en" else "8.192"
    assert sep in page  # the context is printed at all
    assert bare_numbers(page) == []
