"""The built site in a real headless Chromium (Debian's), served on loopback.

Every page in both languages must load without console errors and without a
single request leaving localhost; charts must be there; the language switcher
must lead to the same page in the other language; every evidence link must
land on an anchor that exists.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from conftest import campaign_text

from browser import browser, needs_chromium  # noqa: F401  (fixture)

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def site(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    db = root / "s.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short", "medium"),
                         reasoning=(False, True), reps=2, reps_r=1, max_tokens=8, pinned="tiny-a")
    text = text.replace('name = "test"', 'name = "test"\ncanaries = true')
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    first = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None).run_id
    second = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None).run_id
    sid = store.db.execute("select min(id) from samples where run_id = ?", [second]).fetchone()[0]
    store.close()
    project = root / "proj"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / f"run-{second}.contradictions.toml").write_text(f"""
[[contradiction]]
title = {{ en = "A title with <script>alert(1)</script> in it", de = "Titel mit <script>alert(1)</script>" }}
[contradiction.a]
text = {{ en = "one side", de = "eine Seite" }}
evidence = ["sample-{sid}"]
[contradiction.b]
text = {{ en = "other side", de = "andere Seite" }}
evidence = ["sample-{sid}"]
""")
    out = build(db, project)["site_dir"]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", first, second
    server.shutdown()


#: pages opened at once by the crawl: each waits for half a second without a request (network idle),
#: and those waits run side by side in the browser
CRAWL_BATCH = 6


def _crawl(browser, base: str) -> dict[str, dict]:
    """Visit every internal page reachable from both language roots (downloads are files, not pages:
    tests/test_exports.py checks them)."""
    seen: dict[str, dict] = {}
    queue = [base + "/index.html", base + "/de/index.html"]
    while queue:
        batch: list[str] = []
        while queue and len(batch) < CRAWL_BATCH:
            url = queue.pop()
            if url not in seen and url not in batch:
                batch.append(url)
        opened = []
        for url in batch:  # all loading at once
            page = browser.new_page()
            errors, requests = [], []
            page.on("console", lambda m, e=errors: e.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc, e=errors: e.append(str(exc)))
            page.on("request", lambda r, q=requests: q.append(r.url))
            opened.append((url, page, page.goto(url, wait_until="commit"), errors, requests))
        for url, page, resp, errors, requests in opened:
            page.wait_for_load_state("networkidle")
            info = {
                "status": resp.status if resp else None,
                "errors": list(errors),
                "requests": list(requests),
                "ids": set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)")),
                "links": page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"),
                "svgs": page.eval_on_selector_all("img[src$='.svg']", "els => els.map(e => [e.src, e.naturalWidth])"),
                "alternates": page.eval_on_selector_all("a[hreflang]", "els => els.map(e => [e.hreflang, e.href])"),
                "text": page.inner_text("body"),
                "scripts_with_alert": page.eval_on_selector_all("script", "els => els.filter(s => s.textContent.includes('alert(1)')).length"),
            }
            seen[url] = info
            page.close()
            for href in info["links"]:
                target, _ = urldefrag(href)
                if target.startswith(base) and not target.endswith((".svg", ".xml", ".gz", ".json", ".js", ".css", ".csv", ".db")) \
                        and "/search/" not in target:
                    queue.append(target)
    return seen


@pytest.fixture(scope="module")
def crawled(site, browser):
    base, first, second = site
    return base, first, second, _crawl(browser, base)


def test_every_page_loads_clean_and_stays_on_localhost(crawled):
    base, first, second, pages = crawled
    assert len(pages) >= 10
    for url, info in pages.items():
        assert info["status"] == 200, url
        assert info["errors"] == [], (url, info["errors"])
        for req in info["requests"]:
            host = urlparse(req).hostname
            assert req.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"), (url, req)
    for lang_prefix in ("", "/de"):
        for rid in (first, second):
            assert f"{base}{lang_prefix}/runs/run-{rid}.html" in pages


def test_charts_present_and_loaded(crawled):
    base, first, second, pages = crawled
    for prefix in ("", "/de"):
        svgs = pages[f"{base}{prefix}/runs/run-{second}.html"]["svgs"]
        assert len(svgs) >= 2
        assert all(width > 0 for _, width in svgs), svgs
    de = pages[f"{base}/de/runs/run-{second}.html"]["svgs"]
    assert all(src.endswith("-de.svg") for src, _ in de)


def test_language_switcher_leads_to_the_same_page(crawled):
    base, first, second, pages = crawled
    for path in (f"/runs/run-{second}.html", f"/compare/run-{second}-vs-{first}.html", "/runs/index.html"):
        en, de = pages[base + path], pages[base + "/de" + path]
        assert dict(en["alternates"]).get("de") == base + "/de" + path
        assert dict(de["alternates"]).get("en") == base + path


def test_every_evidence_link_lands_on_an_existing_anchor(crawled):
    base, first, second, pages = crawled
    checked = 0
    for url, info in pages.items():
        for href in info["links"]:
            target, frag = urldefrag(href)
            if not frag or not target.startswith(base) or not re.match(r"(cell|sample|line)-", frag):
                continue
            page = pages.get(target)
            assert page is not None, (url, href)
            assert frag in page["ids"], (url, href)
            checked += 1
    assert checked > 50


def test_german_decimal_comma_and_foreign_text_escaped(crawled):
    base, first, second, pages = crawled
    de = pages[f"{base}/de/runs/run-{second}.html"]["text"]
    assert re.search(r"\d,\d\s+\d[\d.]*,\d–\d[\d.]*,\d · n=\d", de)  # a median, its range below, German style
    en = pages[f"{base}/runs/run-{second}.html"]
    assert "<script>alert(1)</script>" in en["text"]  # shown as text ...
    assert en["scripts_with_alert"] == 0  # ... never as a script element


def test_main_table_fits_a_normal_screen_and_chart_text_is_not_cut(site, browser):
    """At 1280×900 (a common laptop screen) the run article's main table needs no sideways scrolling
    and no header wraps; every text of every chart lies inside its SVG as Chromium's fonts draw it
    (vl-convert measured with narrower metrics and cut a legend title to "prompt clas")."""
    base, first, second = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        for prefix in ("", "/de"):
            page.goto(f"{base}{prefix}/runs/run-{second}.html", wait_until="networkidle")
            table = page.eval_on_selector(
                "table", "t => { const w = t.closest('.md-typeset__scrollwrap') || t.parentElement;"
                " const ths = [...t.querySelectorAll('th')];"
                " const lh = parseFloat(getComputedStyle(ths[0]).lineHeight);"
                " return {scroll: w.scrollWidth, client: w.clientWidth,"
                " tall: ths.filter(h => h.getBoundingClientRect().height - parseFloat(getComputedStyle(h).paddingTop)"
                " - parseFloat(getComputedStyle(h).paddingBottom) > 1.5 * lh).map(h => h.innerText)} }")
            assert table["scroll"] <= table["client"] + 1, (prefix, table)
            assert table["tall"] == [], (prefix, table)
            svgs = page.eval_on_selector_all("img[src$='.svg']", "els => els.map(e => e.src)")
            assert svgs
            for src in svgs:
                page.goto(src)
                cut = page.eval_on_selector_all(
                    "text", "ts => { const svg = document.documentElement; const w = svg.width.baseVal.value;"
                    " return ts.filter(t => t.getBoundingClientRect().right > w + 0.5).map(t => t.textContent) }")
                assert cut == [], (src, cut)
                page.goto(f"{base}{prefix}/runs/run-{second}.html", wait_until="networkidle")
    finally:
        page.close()
