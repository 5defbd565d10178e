"""``cardproof report build`` says how to view the site; ``cardproof report serve`` serves it.

Real parts: an empty real SQLite store, a real ``mkdocs build --strict``, the
CLI as a subprocess, and HTTP over loopback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cardproof.daemon.store import open_store
from cardproof.report.serve import config_warnings

CLI = [sys.executable, "-m", "cardproof.cli"]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("serve")
    open_store(root / "s.db").close()
    proc = subprocess.run([*CLI, "report", "build", "--db", str(root / "s.db"), "--project", str(root / "proj")],
                          capture_output=True, text=True, env={**os.environ, "CARDPROOF_HOME": str(root / "home")})
    assert proc.returncode == 0, proc.stderr
    return root / "proj", proc


def test_build_says_how_to_view_the_site(project):
    proj, proc = project
    index = (proj / "build" / "site" / "index.html").resolve()
    assert f"open from disk: {index.as_uri()}" in proc.stdout
    assert "cardproof report serve --project" in proc.stdout


def _serve(proj: Path, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*CLI, "report", "serve", "--project", str(proj), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert " at http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split(" at ", 1)[1].split(" ", 1)[0]


@pytest.mark.parametrize("prefix", ["/", "/sub/path/", "results"])
def test_serve_on_loopback_under_a_prefix_without_listings(project, prefix):
    proj, _ = project
    proc, base = _serve(proj, "--prefix", prefix)
    try:
        assert base.startswith("http://127.0.0.1:") and base.endswith("/")
        port_root = base.split("/", 3)[:3]
        with httpx.Client(timeout=10) as http:
            assert http.get(base).status_code == 200  # the folder's index.html
            assert http.get(base + "de/index.html").status_code == 200
            assert http.get(base + "runs/index.html").status_code == 200
            assert http.get(base + "de/").status_code == 200  # index.html served, never a listing
            assert http.get(base + "assets/").status_code == 404  # a folder without index.html: no listing
            if prefix != "/":
                assert http.get("/".join(port_root) + "/index.html").status_code == 404  # outside the prefix
                assert http.get(base.rstrip("/"), follow_redirects=False).headers["location"].endswith("/")
    finally:
        proc.terminate()
        proc.wait(10)


def test_serve_refuses_bad_input_with_one_line(project, tmp_path):
    proj, _ = project
    bad = subprocess.run([*CLI, "report", "serve", "--project", str(proj), "--port", "0", "--prefix", "/a/../b/"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--prefix" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    missing = subprocess.run([*CLI, "report", "serve", "--project", str(tmp_path / "none"), "--port", "0"],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and str(tmp_path / "none" / "build" / "site") in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_site_title_and_description_in_each_language(project):
    """The scaffold's mkdocs.yml gives the German pages a German site name and description."""
    proj, _ = project
    site = proj / "build" / "site"
    en, de = (site / "index.html").read_text(), (site / "de" / "index.html").read_text()
    assert "<title>cardproof results" in en and 'content="Measurements of local LLM inference servers' in en
    assert "cardproof-Ergebnisse" in de and 'content="Messungen lokaler LLM-Inferenzserver' in de
    assert "cardproof results" not in de


def test_build_notes_an_older_mkdocs_yml_that_cannot_work_from_disk(project, tmp_path):
    """scaffold() never overwrites an author's mkdocs.yml: the build names what keeps it from working anywhere."""
    proj, fresh = project
    assert "note:" not in fresh.stderr  # the scaffold's own config works everywhere
    old = tmp_path / "old"
    old.mkdir()
    scaffolded = (proj / "mkdocs.yml").read_text()
    (old / "mkdocs.yml").write_text(scaffolded.replace("use_directory_urls: false", "use_directory_urls: true")
                                    .replace("  - offline\n", ""))
    open_store(tmp_path / "o.db").close()
    proc = subprocess.run([*CLI, "report", "build", "--db", str(tmp_path / "o.db"), "--project", str(old)],
                          capture_output=True, text=True, env={**os.environ, "CARDPROOF_HOME": str(tmp_path / "h")})
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stderr.splitlines() if ln.startswith("note:")]
    assert len(notes) == 2, proc.stderr
    assert "use_directory_urls" in notes[0] and str(old / "mkdocs.yml") in notes[0]
    assert "'offline'" in notes[1]


def _footer(page: Path) -> str:
    text = page.read_text()
    start = text.index('<div class="md-copyright">')
    return " ".join(re.sub(r"<[^>]+>", " ", text[start:text.index("</footer>", start)]).split())


def test_the_footer_speaks_each_pages_language(project):
    """The theme's own footer line ('Made with Material for MkDocs') is English on every page; the
    scaffold turns it off and says the same per language, so a German page ends in German."""
    proj, _ = project
    site = proj / "build" / "site"
    de_pages = sorted((site / "de").rglob("*.html"))
    en_pages = sorted(p for p in site.rglob("*.html") if (site / "de") not in p.parents and p.name != "404.html")
    assert de_pages and en_pages
    for page in de_pages:
        assert _footer(page) == "Erstellt mit cardproof, MkDocs und Material for MkDocs", page
        assert "Made with" not in page.read_text(), page
    for page in en_pages:
        assert _footer(page) == "Built with cardproof, MkDocs and Material for MkDocs", page


def test_build_notes_an_older_mkdocs_yml_with_the_english_footer(project, tmp_path):
    proj, _ = project
    old = tmp_path / "old"
    old.mkdir()
    (old / "mkdocs.yml").write_text((proj / "mkdocs.yml").read_text().replace("  generator: false\n", ""))
    notes = config_warnings(old)
    assert len(notes) == 1 and "'Made with' in English" in notes[0] and str(old / "mkdocs.yml") in notes[0]
    assert config_warnings(proj) == []
