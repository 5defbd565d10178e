"""Observed requests and logs without a campaign in the published site.

Real third-party logs (tests/fixtures/logs/real/) imported with no run become
articles of their own; a run's article shows the server's own request
counters apart from cardproof's samples, and leaves cardproof's own requests
out of them. The site is built with the real ``mkdocs build --strict`` and
read in Debian's headless Chromium, served on loopback.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path, load_summaries
from cardproof.daemon.store import open_store, utcnow
from cardproof.report.build import _env, build
from cardproof.report.evidence import run_evidence
from cardproof.report.i18n import Lang

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
ROUTER = Path(__file__).parent / "fixtures" / "logs" / "router-interleaved.log"
from browser import launch, needs_chromium
HOSTILE = "0.00.902.000 I srv  params_from_: <script>alert(1)</script> *b* [x](http://e) | p"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("logsite")
    lines = (REAL / "poseidon-rocm-then-cpu.log").read_text().splitlines()
    hostile = root / "hostile-poseidon.log"  # a foreign line inside load 1: it must show as text
    hostile.write_text("\n".join(lines[:50] + [HOSTILE] + lines[50:]) + "\n")
    store = open_store(root / "s.db")
    for path in (REAL / "llama-runner-metal-2026.log", REAL / "ik-llama-pr237-15x3090.log", hostile):
        import_path(store, path)
    loads = load_summaries(store.db)
    store.close()
    out = build(root / "s.db", root / "proj")["site_dir"]
    return root / "proj", out, loads


def test_each_log_without_a_run_gets_an_article_with_working_links(site):
    project, out, loads = site
    md = {p.name: p.read_text() for p in (project / "site" / "logs").glob("*.md")}
    assert sorted(md) == ["index.de.md", "index.md", "source-1.de.md", "source-1.md", "source-2.de.md",
                          "source-2.md", "source-3.de.md", "source-3.md"]
    for name, text in md.items():
        if name.startswith("index"):
            continue
        anchors = set(re.findall(r'<span id="line-(\d+)"></span>', text))
        links = set(re.findall(r"\(#line-(\d+)\)", text))
        assert links and links <= anchors, name
    metal = md["source-1.md"]
    assert "## Observed in the server log, not measured by cardproof" in metal
    # the two requests, from the server's counters: 62/3297.85 ms and 717/40400.49 ms
    assert "18.3 (17.8–18.8, n=2)" in metal and "363 (353–373, n=2)" in metal
    assert "still running when the log ends" in metal
    assert "Observed in the server log" not in md["source-2.md"]  # the 15-GPU paste has no request
    assert "[12,615.77 MiB](#line-" in md["source-2.md"]
    de = md["source-1.de.md"]
    assert "Im Server-Protokoll beobachtet, nicht von cardproof gemessen" in de and "18,3 (17,8–18,8, n=2)" in de
    assert "process exit" in md["source-3.md"]
    index = md["index.md"]
    assert "[llama-runner-metal-2026.log](source-1.md)" in index


@pytest.fixture(scope="module")
def pages(site):
    from playwright.sync_api import sync_playwright

    project, out, loads = site
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    seen = {}
    try:
        with sync_playwright() as p:
            b = launch(p)
            # pages are name.html (use_directory_urls: false); /logs/ is served from logs/index.html
            for path in ("/logs/", "/logs/source-1.html", "/de/logs/source-1.html", "/logs/source-3.html"):
                page = b.new_page()
                errors = []
                page.on("console", lambda m, e=errors: e.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda exc, e=errors: e.append(str(exc)))
                resp = page.goto(base + path, wait_until="networkidle")
                seen[path] = {"status": resp.status, "errors": errors, "text": page.inner_text("body"),
                              "ids": set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)")),
                              "links": page.eval_on_selector_all("a[href*='#line-']", "els => els.map(e => e.href)"),
                              "scripts": page.eval_on_selector_all(
                                  "script", "els => els.filter(s => s.textContent.includes('alert(1)')).length")}
                page.close()
            b.close()
    finally:
        server.shutdown()
    return seen


@needs_chromium
def test_log_articles_in_a_real_browser(pages):
    for path, info in pages.items():
        assert info["status"] == 200 and info["errors"] == [], (path, info["errors"])
    metal = pages["/logs/source-1.html"]
    assert "Observed in the server log, not measured by cardproof" in metal["text"]
    assert metal["links"] and all(href.split("#")[1] in metal["ids"] for href in metal["links"])
    hostile = pages["/logs/source-3.html"]
    assert "<script>alert(1)</script> *b* [x](http://e) | p" in hostile["text"] and hostile["scripts"] == 0
    assert "llama-runner-metal-2026.log" in pages["/logs/"]["text"]


# -- a run's article: the server's counters beside the measured samples, cardproof's own left out ------------

@pytest.fixture
def run_db(tmp_path):
    store = open_store(tmp_path / "r.db")
    cid = store.insert("campaigns", {"name": "t", "sha256": "x", "registered_at": utcnow()})
    run_id = store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": "completed"})
    import_path(store, ROUTER, run_id=run_id)
    yield store, run_id
    store.close()


def render(evidence, lang: str) -> str:
    L = Lang(lang)
    return _env().get_template("sections/observed.md.j2").render(_=L.gettext, L=L, evidence=evidence)


def test_a_runs_article_leaves_cardproofs_own_requests_out(run_db):
    """The router recording's requests were sent by the test that recorded it; one of them is made a
    measured sample of this run (same counters): it is then cardproof's own and no longer 'observed'."""
    store, run_id = run_db
    before = {ld["id"]: ld["observed"] for ld in load_summaries(store.db, run_id=run_id)}
    load_id, obs = next((k, v) for k, v in before.items() if v["count"] >= 2)
    row = store.db.execute("select o.prompt_tokens, o.generated_tokens, o.prompt_ms from observed_requests o "
                           "join log_lines l on l.id = o.line_id where l.load_id = ? order by o.id limit 1",
                           [load_id]).fetchone()
    store.insert("samples", {"run_id": run_id, "prompt_tokens": row[0], "generated_tokens": row[1],
                             "prompt_ms": row[2] + 0.004, "load_id": load_id, "kind": "measure"})
    after = {ld["id"]: ld["observed"] for ld in load_summaries(store.db, run_id=run_id)}
    assert after[load_id]["count"] == obs["count"] - 1 and after[load_id]["own"] == 1
    md = render(run_evidence(store.db, run_id), "en")
    assert "## Observed in the server log, not measured by cardproof" in md
    assert re.search(rf"\| \[{load_id}\]\(#load-{load_id}\) \| tiny-[ab] \| \[{after[load_id]['count']}\]\(#line-\d+\)", md)


def test_no_section_without_observed_requests(tmp_path):
    store = open_store(tmp_path / "e.db")
    try:
        import_path(store, REAL / "ik-llama-pr237-15x3090.log")
        ev = {"loads": load_summaries(store.db)}
        for ld in ev["loads"]:
            ld["shown"] = []
    finally:
        store.close()
    assert "Observed" not in render(ev, "en")
