"""German log pages: the server's lines and CUDA errors are quoted evidence, the prose around them German.

Real parts: real third-party logs (tests/fixtures/logs/real/) imported with
no run, the real report build with ``mkdocs build --strict``, the built HTML
read as a reader sees its prose (tests/test_i18n_german_pages.py's reader:
code, <samp>, <q> and quotations left out).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.i18n import CATALOGUE
from test_i18n_german_pages import DECIMAL_POINT, english_runs, prose

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"


@pytest.fixture(scope="module")
def log_pages(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("delogs")
    store = open_store(root / "s.db")
    for name in ("llama-runner-metal-2026.log", "poseidon-rocm-then-cpu.log"):
        import_path(store, REAL / name)
    store.close()
    site = build(root / "s.db", root / "proj")["site_dir"]
    pages = {p.name: prose(p) for p in (site / "de" / "logs").glob("source-*.html")}
    assert len(pages) == 2
    return pages


def test_log_lines_are_evidence_not_german_prose(log_pages):
    """A log line holds English and decimal points (``0.00.902.000``, ``18.27 ms``): shown as <samp>, never prose."""
    found = [(page, n) for page, text in log_pages.items() for n in DECIMAL_POINT.findall(text)]
    assert found == []


def test_no_catalogue_english_on_german_log_pages(log_pages):
    english = english_runs(CATALOGUE)
    found = [(page, m) for page, text in log_pages.items() for m in english if m in text]
    assert found == []
