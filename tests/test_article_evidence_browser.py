"""The article's evidence is one click away, on its own page, in a real headless Chromium (Debian's).

A real run against the real llama-server (with the server log captured, so
log-line links exist), built with mkdocs --strict, served on loopback. Every
link from the article into its evidence page must land on an element with
that id there, in the row of the cell it names; every cell row of the
evidence page must link back to an element of the article.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from urllib.parse import urldefrag

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from conftest import campaign_text

from browser import browser, needs_chromium  # noqa: F401  (fixture)

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def served(own_router, tmp_path_factory):
    root = tmp_path_factory.mktemp("evsite")
    db = root / "e.db"
    store = open_store(db)
    text = campaign_text(own_router.url, models=("tiny-b", "tiny-a"), classes=("short", "medium"),
                         reasoning=(False,), reps=3, max_tokens=8, pinned="tiny-a")
    text = text.replace('name = "test"', 'name = "test"\ncanaries = true').replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{own_router.log_path}"')
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    run_id = run_campaign(store, parse_campaign(text, "e.toml"), echo=lambda s: None).run_id
    cells = {cid: (model, cls) for cid, model, cls in store.db.execute(
        "select cells.id, models.name, prompt_class from cells join models on models.id = model_id "
        "where run_id = ? and coalesce(kind, 'measure') = 'measure'", [run_id])}
    store.close()
    out = build(db, root / "proj")["site_dir"]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runs = out / "runs"
    # with or without directory URLs, whichever the site's mkdocs.yml says
    article = f"runs/run-{run_id}/" if (runs / f"run-{run_id}" / "index.html").exists() else f"runs/run-{run_id}.html"
    yield f"http://127.0.0.1:{server.server_address[1]}/", article, run_id, cells
    server.shutdown()


def _links(page) -> list[str]:
    return page.eval_on_selector_all("article a[href], .md-content a[href]", "els => els.map(e => e.href)")


def test_every_evidence_link_lands_on_its_row_and_links_back(served, browser):
    base, article_path, run_id, cells = served
    page = browser.new_page()
    page.goto(base + article_path, wait_until="networkidle")
    article_url = page.url
    article_ids = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
    into = [h for h in _links(page) if f"run-{run_id}-evidence" in h and urldefrag(h)[1]]
    assert len(into) > len(cells), into  # every cell's figure and more (loads, log lines)
    # no evidence row is left on the article itself
    assert not any(re.match(r"(cell|sample|line)-\d", i) for i in article_ids)
    evidence_url = urldefrag(into[0])[0]
    page.goto(evidence_url, wait_until="networkidle")
    rows = {i: t for i, t in page.eval_on_selector_all(
        "[id]", "els => els.map(e => [e.id, (e.closest('tr') || e.parentElement).innerText])")}
    landed = 0
    for href in into:
        target, frag = urldefrag(href)
        assert target == evidence_url, href
        assert frag in rows, href
        m = re.fullmatch(r"cell-(\d+)", frag)
        if m:  # the row named by the link is the row of that model and class
            model, cls = cells[int(m.group(1))]
            assert model in rows[frag] and cls in rows[frag], (frag, rows[frag])
        landed += 1
    assert landed >= len(cells)
    # one click: the browser really scrolls to the row
    first_cell = next(h for h in into if "#cell-" in h)
    page.goto(first_cell, wait_until="networkidle")
    frag = urldefrag(first_cell)[1]
    assert page.evaluate(f"document.getElementById('{frag}').getBoundingClientRect().top < window.innerHeight")
    # each cell row links back to its figure in the article
    back = [h for h in _links(page) if urldefrag(h)[0] == article_url and urldefrag(h)[1].startswith("fig-cell-")]
    assert {int(urldefrag(h)[1].split("-")[-1]) for h in back} == set(cells)
    assert all(urldefrag(h)[1] in article_ids for h in back)
    # in each cell the medians the article shows are in bold: decode, prefill and TTFT, one value each
    # (two where n is even), so at least three bold figures per cell
    bold = page.eval_on_selector_all("td strong", "els => els.map(e => e.innerText)")
    assert sum(bool(re.fullmatch(r"[\d.,]+", b)) for b in bold) >= 3 * len(cells), bold
    page.close()


def test_probe_exchanges_are_on_the_evidence_page(llama_server, tmp_path, browser):
    """A real run with probes: the article keeps the verdicts and one pointer, the exchanges are evidence;
    'a difference of one task is one task' is said once, with every probe's task count."""
    db = tmp_path / "p.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), reps=1, pinned="tiny-a")
    text += "\n[probes]\nmax_tokens = 8\nrepeat = 1\ncode_timeout_s = 5\n"
    run_id = run_campaign(store, parse_campaign(text, "p.toml"), echo=lambda s: None).run_id
    probe_ids = [r[0] for r in store.db.execute("select id from probe_results where run_id = ?", [run_id])]
    store.close()
    assert probe_ids
    project = tmp_path / "proj"
    out = build(db, project)["site_dir"]
    article = (project / "site" / "runs" / f"run-{run_id}.md").read_text()
    evidence = (project / "site" / "runs" / f"run-{run_id}-evidence.md").read_text()
    assert article.count("A difference of one task is one task.") == 1
    assert f"](run-{run_id}-evidence.md#probe-exchanges)" in article
    assert not any(f'<span id="probe-{pid}"></span>' in article for pid in probe_ids)
    assert all(f'<span id="probe-{pid}"></span>' in evidence for pid in probe_ids)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        path = f"runs/run-{run_id}/" if (out / "runs" / f"run-{run_id}" / "index.html").exists() else f"runs/run-{run_id}.html"
        page = browser.new_page()
        page.goto(base + path, wait_until="networkidle")
        link = next(h for h in _links(page) if urldefrag(h)[1] == "probe-exchanges" and "-evidence" in h)
        page.goto(link, wait_until="networkidle")
        ids = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
        assert "probe-exchanges" in ids and {f"probe-{pid}" for pid in probe_ids} <= ids
        page.close()
    finally:
        server.shutdown()
