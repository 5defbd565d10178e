"""The built site works wherever it is put: at a server's root, under a sub-path, and from disk.

Real parts only: runs measured against the real llama-server, a real
``mkdocs build --strict``, a real HTTP server on loopback (one that answers
404 outside its sub-path, so a root-absolute link shows), and Debian's
headless Chromium opening the pages over http:// and file://.

In each of the three ways every page of both languages reachable from the two
home pages is read from its file, its links resolved against its own address
as a browser resolves them: every internal link must name a file that exists
(no folder, which a browser shows as a listing from disk), every fragment an id
of its page, and the language switch on every page must lead to the same page
in the other language. One page of each kind (both runs' articles always) is
opened in Chromium: no page may log a console error or ask for anything off
localhost, the home pages' switch is clicked, the charts must load, and search
must find a page. Every page is opened in Chromium at the root by
tests/test_site_browser.py.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import re
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from conftest import campaign_text

from browser import browser, needs_chromium  # noqa: F401  (fixture)
PAGE_SUFFIXES = (".html",)

pytestmark = needs_chromium


class _PrefixHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site under ``prefix`` only; anything else is a 404, as on a shared host."""

    prefix = "/"

    def send_head(self):
        path = urlparse(self.path).path
        if not path.startswith(self.prefix):
            self.send_error(404, "outside the site's sub-path")
            return None
        self.path = "/" + self.path[len(self.prefix):]
        return super().send_head()

    def log_message(self, *args, **kwargs):
        pass


def _serve(root: Path, prefix: str):
    handler = type("H", (_PrefixHandler,), {"prefix": prefix})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{prefix}"


@pytest.fixture(scope="module")
def built(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("anywhere")
    db = root / "s.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short",),
                         reasoning=(False, True), reps=2, reps_r=1, max_tokens=8, pinned="tiny-a")
    # Tiny models stop at max_tokens and run on the CPU: keep those samples in the figures.
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    first = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None).run_id
    second = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None).run_id
    store.close()
    out = build(db, root / "proj")["site_dir"]
    return out, first, second


@pytest.fixture(scope="module", params=["root", "subpath", "file"])
def way(request, built):
    """The site's base URL (ending in '/') in one of the three ways it gets read."""
    out = built[0]
    if request.param == "file":
        yield out, out.as_uri() + "/"
        return
    server, base = _serve(out, "/" if request.param == "root" else "/sub/path/")
    yield out, base
    server.shutdown()


def _file_for(out: Path, base: str, url: str) -> Path:
    rel = unquote(urldefrag(url)[0][len(base):].split("?")[0])
    return out / (rel or "index.html")


def _local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in ("file", "data", "blob") or parsed.hostname in ("127.0.0.1", "localhost")


def _open(browser, url: str, wait_until: str = "networkidle") -> tuple[object, dict]:
    page = browser.new_page()
    seen = {"errors": [], "requests": [], "failed": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("requestfailed", lambda r: seen["failed"].append(r.url))
    resp = page.goto(url, wait_until=wait_until)
    seen["status"] = resp.status if resp is not None else None
    return page, seen


#: pages opened at once in the browser: each waits for half a second without a request (network idle),
#: and those waits run side by side
CRAWL_BATCH = 6


class _PageLinks(html.parser.HTMLParser):
    """What a page's HTML links and names: every ``a href``, every ``id``, its language switch."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.switch: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
            if "md-select__link" in (a.get("class") or "").split() and a.get("hreflang"):
                self.switch[a["hreflang"]] = a["href"]


def _read_site(out: Path, base: str) -> dict[str, dict]:
    """Every page reachable from both home pages, read from its file: its links and the language switch
    resolved against the page's own address in this way (as a browser resolves them), and its ids."""
    pages: dict[str, dict] = {}
    queue = [base + "index.html", base + "de/index.html"]
    while queue:
        url = queue.pop()
        if url in pages:
            continue
        parsed = _PageLinks()
        parsed.feed(_file_for(out, base, url).read_text(encoding="utf-8"))
        other = "en" if url.startswith(base + "de/") else "de"
        info = {"links": [urljoin(url, h) for h in parsed.links], "ids": parsed.ids,
                "switch_to": urljoin(url, parsed.switch[other]) if other in parsed.switch else None}
        pages[url] = info
        for href in info["links"]:
            target = urldefrag(href)[0]
            if target.startswith(base) and target.endswith(PAGE_SUFFIXES) and _file_for(out, base, target).is_file():
                queue.append(target)
    return pages


def _kind(base: str, url: str) -> str:
    """A page's kind: its folder and its name with numbers and model names left out (every run's article
    is one kind, every trend page another)."""
    folder, _, name = url[len(base):].rpartition("/")
    return folder + "/" + (name.split("-")[0] + "-*" if folder.endswith("trends") else re.sub(r"\d+", "#", name))


def _sample(base: str, urls, must: set[str]) -> list[str]:
    """``must``, and one page of every kind that ``must`` leaves out."""
    chosen = sorted(must)
    kinds = {_kind(base, u) for u in chosen}
    for url in sorted(urls):
        if _kind(base, url) not in kinds:
            kinds.add(_kind(base, url))
            chosen.append(url)
    return chosen


def _open_all(browser, urls: list[str], base: str) -> dict[str, dict]:
    """Each page in Chromium: how it loaded, what it asked for, what it logged, its charts; the home pages'
    language switch is clicked."""
    pages: dict[str, dict] = {}
    for i in range(0, len(urls), CRAWL_BATCH):
        batch = urls[i:i + CRAWL_BATCH]
        opened = [_open(browser, url, wait_until="commit") for url in batch]  # all loading at once
        for url, (page, info) in zip(batch, opened):
            page.wait_for_load_state("networkidle")
            info["final_url"] = page.url
            info["text"] = page.inner_text("body")
            info["svgs"] = page.eval_on_selector_all("img[src$='.svg']", "els => els.map(e => [e.src, e.naturalWidth])")
            other = "en" if url.startswith(base + "de/") else "de"
            switch = page.query_selector(f"a.md-select__link[hreflang={other}]")
            info["clicked_to"] = None
            if switch is not None and url in (base + "index.html", base + "de/index.html"):
                with page.expect_navigation(wait_until="load"):
                    switch.evaluate("a => a.click()")  # the menu opens on hover; the click is the reader's
                info["clicked_to"] = page.url
            page.close()
            pages[url] = info
    return pages


@pytest.fixture(scope="module")
def crawled(way, browser, built):
    """Every page read from its file (links, ids, language switch), and one page of each kind opened in
    the browser (both runs' articles always): pages of one kind share their template and their depth,
    so what resolves on one resolves on all."""
    out, base = way
    _, first, second = built
    read = _read_site(out, base)
    must = {base + "index.html", base + "de/index.html"} | {
        f"{base}{lang}runs/run-{rid}.html" for lang in ("", "de/") for rid in (first, second)}
    # at the root, every page is opened by tests/test_site_browser.py: here the home pages and the runs
    opened = _open_all(browser, sorted(must) if _at_root(base) else _sample(base, read, must), base)
    return out, base, read, opened


def _at_root(base: str) -> bool:
    return base.startswith("http") and urlparse(base).path == "/"


def test_every_page_opens_clean_and_stays_local(crawled, built):
    out, base, read, opened = crawled
    _, first, second = built
    for lang in ("", "de/"):
        for rid in (first, second):
            assert f"{base}{lang}runs/run-{rid}.html" in read and f"{base}{lang}runs/run-{rid}.html" in opened
    assert len(read) >= 10
    kinds = {_kind(base, u) for u in opened}
    assert kinds == {_kind(base, u) for u in read} or _at_root(base)  # every kind of page opened
    for url, info in opened.items():
        assert info["status"] in (200, 0, None) if base.startswith("file:") else info["status"] == 200, url
        assert info["errors"] == [], (url, info["errors"])
        assert info["failed"] == [], (url, info["failed"])
        assert [r for r in info["requests"] if not _local(r)] == [], url
        assert "Index of" not in info["text"] and "Directory listing" not in info["text"], url


def test_every_internal_link_names_a_file_that_exists(crawled):
    out, base, pages, _ = crawled
    checked = 0
    for url, info in pages.items():
        for href in info["links"]:
            target, frag = urldefrag(href)
            if not target.startswith(base):
                assert not href.startswith("file:") and urlparse(href).hostname not in ("127.0.0.1", "localhost"), \
                    (url, href)  # a local link outside the site: root-absolute, breaks under a sub-path
                continue
            path = _file_for(out, base, target)
            assert path.is_file(), (url, href)  # a folder opens as a listing from disk
            if frag and target.endswith(".html") and target in pages:
                assert frag in pages[target]["ids"], (url, href)
            checked += 1
    assert checked > 50


def test_language_switch_on_every_page_keeps_the_page(crawled):
    out, base, pages, opened = crawled
    assert opened[base + "index.html"]["clicked_to"] == base + "de/index.html"  # clicked in the browser
    assert opened[base + "de/index.html"]["clicked_to"] == base + "index.html"
    for url, info in pages.items():
        rel = url[len(base):]
        expected = base + (rel[3:] if rel.startswith("de/") else "de/" + rel)
        assert info["switch_to"] == expected, url


def test_charts_load_in_both_languages(crawled, built):
    out, base, _, pages = crawled
    _, first, second = built
    for lang in ("", "de/"):
        svgs = pages[f"{base}{lang}runs/run-{second}.html"]["svgs"]
        assert svgs, lang
        assert all(width > 0 for _, width in svgs), svgs


@pytest.mark.parametrize("home", ["index.html", "de/index.html"])
def test_search_finds_a_run(way, browser, home):
    out, base = way
    page, info = _open(browser, base + home)
    # A query typed before the index is read is dropped: type again until hits come (30 s at most).
    box = page.locator("input.md-search__input")  # in the header at desktop width
    for _ in range(30):
        box.fill("")
        box.press_sequentially("tiny", delay=20)  # as a reader types
        if page.wait_for_timeout(1000) or page.query_selector(".md-search-result__item a[href]"):
            break
    hits = page.eval_on_selector_all(".md-search-result__item a[href]", "els => els.map(e => e.href)")
    page.close()
    assert hits
    assert all(_file_for(out, base, h).is_file() for h in hits), hits
    assert info["errors"] == [], info["errors"]
    assert [r for r in info["requests"] if not _local(r)] == []


def test_code_in_tables_never_breaks_mid_word(way, built, browser):
    """Gate names, verdicts and arms in a narrow window: whole on one line; the table scrolls instead."""
    out, base = way
    _, first, second = built
    page = browser.new_page(viewport={"width": 480, "height": 900})
    page.goto(f"{base}runs/run-{second}.html", wait_until="load")
    codes = page.evaluate("""() => [...document.querySelectorAll('.md-typeset table code')]
        .filter(c => !/\\s/.test(c.textContent) && c.textContent.length > 1)
        .map(c => [c.textContent, c.getClientRects().length])""")
    page.close()
    assert len(codes) >= 5
    assert [text for text, lines in codes if lines != 1] == []
