"""Publishing one new run renders only the pages it changed, and the site is the same as a full build.

Real parts: runs measured against the real llama-server, the real report step and ``mkdocs build
--strict`` with the scaffold's plugins (i18n, search, offline, rss) through
``cardproof.report.site_build``, and Debian's headless Chromium for the search box.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.site import ReportError, mkdocs_build
from conftest import campaign_text

from browser import browser, needs_chromium  # noqa: F401  (fixture)


def _run(db: Path, url: str, model: str) -> int:
    store = open_store(db)
    text = campaign_text(url, models=(model,), classes=("short",), reps=2, max_tokens=8)
    rid = run_campaign(store, parse_campaign(text, "p.toml"), echo=lambda s: None).run_id
    store.close()
    return rid


def _kind(project: Path) -> str:
    return json.loads((project / ".cardproof" / "site-build.json").read_text())["kind"]


def _files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _search_locations(out: Path) -> list[str]:
    return [d["location"] for d in json.loads((out / "search" / "search_index.json").read_text())["docs"]]


@pytest.fixture(scope="module")
def published(llama_server, tmp_path_factory):
    """Two runs of tiny-a built in full, then a run of tiny-b published on top; the HTML's file times
    before the second publish."""
    root = tmp_path_factory.mktemp("publish")
    db, project = root / "p.db", root / "proj"
    first = _run(db, llama_server.url, "tiny-a")
    second = _run(db, llama_server.url, "tiny-a")
    out = build(db, project)["site_dir"]
    assert _kind(project) == "full"
    sources = {p: p.stat().st_mtime_ns for p in (project / "site").rglob("*.md")}
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.html")}
    third = _run(db, llama_server.url, "tiny-b")
    build(db, project)
    index = json.loads((out / "search" / "search_index.json").read_text())
    return {"index_after": [d["location"] for d in index["docs"]], "llama_url": llama_server.url, "root": root, "db": db, "project": project, "out": out,
            "runs": (first, second, third), "sources": sources, "before": before}


def test_a_new_run_renders_only_the_pages_whose_markdown_changed(published):
    project, out = published["project"], published["out"]
    first, second, third = published["runs"]
    assert _kind(project) == "dirty"
    for lang in ("", "de/"):
        assert (out / f"{lang}runs/run-{third}.html").is_file()
    unchanged = [src for src, t in published["sources"].items() if src.exists() and src.stat().st_mtime_ns == t]
    assert any(src.name == f"run-{first}-evidence.md" for src in unchanged)  # the test means something
    kept = 0
    for src in unchanged:
        rel = src.relative_to(project / "site")
        if rel.parent == Path(".") or rel.name.startswith("index."):
            continue  # the pages the navigation names are rendered every time
        if rel.name.endswith(".de.md"):
            html = out / "de" / rel.parent / (rel.name[: -len(".de.md")] + ".html")
        else:
            html = out / rel.parent / (rel.name[: -len(".md")] + ".html")
        assert html.stat().st_mtime_ns == published["before"][html], html  # not rendered again
        kept += 1
    assert kept >= 4


def test_the_published_site_is_the_same_as_a_full_build(published):
    project, out = published["project"], published["out"]
    dirty = _files(out)
    mkdocs_build(project, full=True)
    assert _kind(project) == "full"
    full = _files(out)
    assert sorted(dirty) == sorted(full)
    # 404.html's language switch names each language's home page (it named whichever page the i18n
    # plugin rendered last, which an incremental build and a full one do not share)
    page = full[Path("404.html")].decode()
    assert 'hreflang="en"' in page and 'hreflang="de"' in page
    assert re.findall(r'<link rel="alternate" href="([^"]*)" hreflang="(en|de)"', page) == [("/index.html", "en"), ("/de/index.html", "de")]
    differ = [p for p in full if dirty[p] != full[p]]
    assert differ == []


def test_search_index_keeps_every_page_of_both_languages(published):
    out, (first, second, third) = published["out"], published["runs"]
    locations = published["index_after"]  # as the publish of the new run left it
    pages = {loc.split("#")[0] for loc in locations}
    for lang in ("", "de/"):
        for rid in (first, second, third):
            assert f"{lang}runs/run-{rid}.html" in pages, (lang, rid)
            # raw records stay out: a year of evidence pages would make an index of a gigabyte
            assert f"{lang}runs/run-{rid}-evidence.html" not in pages, (lang, rid)
        assert f"{lang}runs/index.html" in pages and f"{lang}index.html" in pages
    assert len(locations) == len(set(locations))  # no entry twice
    # the offline copy the pages read from disk holds the same index
    js = (out / "search" / "search_index.js").read_text()
    assert js.startswith("var __index = ") and json.loads(js[len("var __index = "):])["docs"]


def test_a_page_whose_markdown_is_gone_is_gone_from_the_site_and_its_search(published):
    project, out, db = published["project"], published["out"], published["db"]
    note = project / "site" / "notes.md"
    note.write_text("# A hand-written note\n\nqqzzyx appears only here.\n")
    build(db, project)
    assert (out / "notes.html").is_file() and (out / "de" / "notes.html").is_file()
    assert any(loc.startswith("notes.html") for loc in _search_locations(out))
    note.unlink()
    build(db, project)
    assert _kind(project) == "full"  # a page linking to the lost one would only be found by a full build
    assert not (out / "notes.html").exists() and not (out / "de" / "notes.html").exists()
    assert not any("notes.html" in loc for loc in _search_locations(out))


def test_a_site_wide_change_builds_every_page_again(published):
    project, out, db = published["project"], published["out"], published["db"]
    (project / "site.toml").write_text('[site]\ntitle = "Renamed results"\n')
    build(db, project)
    (project / "site.toml").unlink()
    assert _kind(project) == "full"
    pages = list(out.rglob("*.html"))
    assert len(pages) > 10
    for page in pages:
        if not page.is_relative_to(out / "de") and page.name != "404.html":  # 404: the last language built
            assert "Renamed results" in page.read_text(), page


def test_a_broken_or_lost_search_cache_means_a_full_build(published):
    project, out, db = published["project"], published["out"], published["db"]
    before = sorted(_search_locations(out))
    (project / ".cardproof" / "search" / "de.json").write_text("{not json")
    build(db, project)
    assert _kind(project) == "full"
    assert sorted(_search_locations(out)) == before
    shutil.rmtree(project / ".cardproof" / "search")
    build(db, project)
    assert _kind(project) == "full"
    assert sorted(_search_locations(out)) == before


def test_a_failed_build_leaves_no_stamp_and_the_next_one_is_full(published):
    project, out, db = published["project"], published["out"], published["db"]
    bad = project / "site" / "broken.md"
    bad.write_text("# Broken\n\n[nowhere](no-such-page.md)\n")
    with pytest.raises(ReportError, match="no-such-page.md"):
        build(db, project)
    assert not (project / ".cardproof" / "site-build.json").exists()
    bad.unlink()
    build(db, project)
    assert _kind(project) == "full"


def test_feed_lists_the_new_run_after_a_partial_build(published, tmp_path):
    import xml.etree.ElementTree as ET

    project = tmp_path / "feedproj"
    shutil.copytree(published["project"], project, symlinks=True)
    url = "https://user.example.org/results/"
    build(published["db"], project, site_url=url)
    fourth = _run(published["db"], published["llama_url"], "tiny-a")
    build(published["db"], project, site_url=url)
    assert _kind(project) == "dirty"
    rss = ET.parse(project / "build" / "site" / "feed_rss_created.xml").getroot()
    links = {i.findtext("link") for i in rss.iter("item")}
    rids = (*published["runs"], fourth)
    assert links == {f"{url}{lang}runs/run-{rid}.html" for rid in rids for lang in ("", "de/")}


@needs_chromium
@pytest.mark.parametrize("home", ["index.html", "de/index.html"])
def test_search_in_chromium_finds_the_new_run_and_an_old_one_by_model_name(published, browser, home):  # noqa: F811
    out, (first, second, third) = published["out"], published["runs"]
    mkdocs_build(published["project"])  # whatever the tests before left: a current site
    page = browser.new_page()
    page.goto((out / home).as_uri(), wait_until="networkidle")
    found = {}
    for model, rid in (("tiny-b", third), ("tiny-a", first)):
        box = page.locator("input.md-search__input")
        hits, agreed = [], 0
        for _ in range(80):  # the index is read while the reader types: wait until three reads agree
            box.fill("")
            box.press_sequentially(model, delay=20)
            page.wait_for_timeout(250)
            now = page.eval_on_selector_all(".md-search-result__item a[href]", "els => els.map(e => e.href)")
            agreed = agreed + 1 if now and now == hits else 0
            hits = now
            if agreed >= 2:
                break
        found[model] = hits
    page.close()
    lang = "de/" if home.startswith("de/") else ""
    assert any(h.split("#")[0].endswith(f"{lang}runs/run-{third}.html") for h in found["tiny-b"]), found["tiny-b"]
    assert any(h.split("#")[0].endswith(f"{lang}runs/run-{first}.html") for h in found["tiny-a"]), found["tiny-a"]
