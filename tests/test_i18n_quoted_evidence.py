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


@pytest.fixture(scope="module")
def failed_run_pages(tiny_models, tmp_path_factory) -> dict[str, str]:
    """A real router killed after the first answer: three requests lost to the same client error."""
    from cardproof.daemon.campaign.model import parse_campaign
    from cardproof.daemon.run.runner import run_campaign
    from conftest import campaign_text, start_router

    root = tmp_path_factory.mktemp("failed")
    (root / "server").mkdir()
    server = start_router(tiny_models, root / "server")
    try:
        store = open_store(root / "f.db")
        camp = parse_campaign(campaign_text(server.url, models=("tiny-b",), reps=4), "f.toml")
        run_campaign(store, camp, echo=lambda line: server.kill() if line.startswith("[1/4]") else None)
        errors = [r[0] for r in store.db.execute("select error_text from samples where error_text is not null")]
        store.close()
    finally:
        server.stop()
    assert len(errors) >= 2
    site = build(root / "f.db", root / "proj")["site_dir"]
    pages = {p.name: p.read_text() for p in (site / "de" / "runs").glob("run-*.html")}
    return {"errors": errors, **pages}


def test_client_error_texts_are_quoted_on_german_pages(failed_run_pages):
    """What the HTTP client said when the server went away is evidence: inside <q>, never German prose."""
    errors = failed_run_pages["errors"]
    words = {w for e in errors for w in e.split() if len(w) > 6 and w.isalpha()}
    assert words
    for name in ("run-1.html", "run-1-evidence.html"):
        html = failed_run_pages[name]
        assert "<q>" in html, name
        text = prose_of(html)
        assert [w for w in words if w in text] == [], name


def prose_of(html: str) -> str:
    from test_i18n_german_pages import _Prose

    p = _Prose()
    p.feed(html)
    return " ".join(" ".join(p.parts).split())


def test_how_a_load_ended_is_said_in_german():
    """``loads.end_reason`` is written by the capture side in English from a closed vocabulary; German
    pages say each in German (a signal name or status as its value) and quote anything unknown."""
    from cardproof.report.i18n import Lang
    from cardproof.report.observations import _END_FIXED, end_reason

    de, en = Lang("de"), Lang("en")
    for text in sorted(_END_FIXED):
        said = str(end_reason(de, text))
        assert text not in said and "<q>" not in said, (text, said)
        assert str(end_reason(en, text)) == text
    assert str(end_reason(de, "exited with status 137")) == "beendet mit Status 137"
    # a known signal comes with what it usually means (daemon/store/crashes.py), anything else as its value
    assert str(end_reason(de, "crashed: SIGSEGV")) == ("abgestürzt: `SIGSEGV` (Speicherzugriffsfehler: der Server "
                                                       "griff auf Speicher zu, der ihm nicht gehört, ein Fehler im "
                                                       "Server, einem Backend oder einem Treiber)")
    assert str(end_reason(de, "crashed: CUDA error")) == "abgestürzt: `CUDA error`"
    assert str(end_reason(de, "something <b>else</b>")).startswith("<q>")  # unknown: quoted, escaped
    assert "<b>" not in str(end_reason(de, "something <b>else</b>"))
    assert str(end_reason(de, None)) == "—"


def test_german_log_pages_say_how_each_load_ended(log_pages):
    """The real logs' loads ended by a process exit or the next start: none of that English in the prose."""
    from cardproof.report.observations import _END_FIXED

    found = [(page, t) for page, text in log_pages.items() for t in _END_FIXED if f": {t}" in text]
    assert found == []
    assert any("Prozess beendet" in text or "nächster Prozess gestartet" in text for text in log_pages.values())
