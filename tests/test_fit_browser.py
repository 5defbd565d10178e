"""The fit table's figures lead to the log lines they were read from, in headless Chromium.

A real run against the real llama-server with a ``[fit]`` table (CPU here:
"not on a card"), stored in real SQLite, built with ``mkdocs build
--strict`` and served on loopback. Every link of a fit row goes to the
run's evidence page, to a line of that load's log that states the figure.
"""

from __future__ import annotations

import functools
import http.server
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

# the words a linked line holds, by the column its link sits in
COLUMN_WORDS = {0: "n_ctx", 3: "KV buffer size", 4: "KV buffer size", 5: "buffer size"}


@pytest.fixture(scope="module")
def site(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("fitsite")
    db = root / "s.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, reps=1) + "\n[fit]\ncontexts = [2048, 8192]\n"
    run_id = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None).run_id
    fits = [r[0] for r in store.db.execute("select id from fit_checks where run_id = ? order by position", [run_id])]
    store.close()
    out = build(db, root / "proj")["site_dir"]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    article = f"runs/run-{run_id}/" if (out / "runs" / f"run-{run_id}" / "index.html").exists() \
        else f"runs/run-{run_id}.html"
    yield {"base": f"http://127.0.0.1:{server.server_address[1]}/", "article": article, "run_id": run_id,
           "fits": fits}
    server.shutdown()


def test_every_fit_figure_links_to_the_log_line_that_states_it(site, browser):
    run_id = site["run_id"]
    page = browser.new_page()
    page.goto(site["base"] + site["article"], wait_until="networkidle")
    assert len(site["fits"]) == 2
    targets: list[tuple[int, str]] = []
    for fit_id in site["fits"]:
        cells = page.evaluate(
            "id => [...document.getElementById(id).closest('tr').querySelectorAll('td')].map("
            "td => [...td.querySelectorAll('a[href]')].map(a => a.href))", f"fit-{fit_id}")
        row = page.evaluate("id => document.getElementById(id).closest('tr').innerText", f"fit-{fit_id}")
        assert "not on a card" in row
        for column, words in COLUMN_WORDS.items():
            assert cells[column], (fit_id, column, row)  # the figure is a link
            for href in cells[column]:
                url, frag = urldefrag(href)
                assert url.split("/")[-1].startswith(f"run-{run_id}-evidence") or \
                    f"run-{run_id}-evidence/" in url, href
                assert frag.startswith("line-")
                targets.append((column, href))
    seen = set()
    for column, href in targets:
        if href in seen:
            continue
        seen.add(href)
        page.goto(href, wait_until="networkidle")
        frag = urldefrag(href)[1]
        text = page.evaluate("id => { const e = document.getElementById(id);"
                             " return e ? e.parentElement.innerText : null; }", frag)
        assert text is not None and COLUMN_WORDS[column] in text, (href, text)
    page.close()
