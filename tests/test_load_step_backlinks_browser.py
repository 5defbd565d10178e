"""Load, rate and depth steps: article row and evidence samples point at each other, in headless Chromium.

A real run against the real llama-server (router, tiny model) with stream,
Poisson-rate and depth steps (one depth refused beyond the slot's context),
stored in real SQLite, built with ``mkdocs build --strict`` and served on
loopback. Each step's row in the article links to the step on the evidence
page; that anchor's row names the same model and step, every sample of the
step is listed under it, and each links back to the step's row.
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


@pytest.fixture(scope="module")
def site(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("stepsite")
    db = root / "s.db"
    store = open_store(db)
    text = (campaign_text(llama_server.url, models=("tiny-a",), classes=("short",), reasoning=(False,), reps=1,
                          max_tokens=8)
            + "\n[load]\nstreams = [1, 2]\nrequests_per_stream = 1\nrates = [5]\nrequests_per_rate = 3\n"
            + "max_tokens = 8\n[depth]\ntokens = [0, 64, 16000000]\nrepetitions = 1\nmax_tokens = 8\n")
    run_id = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None).run_id
    steps = {sid: (axis, streams, rate, depth) for sid, axis, streams, rate, depth in store.db.execute(
        "select id, axis, streams, rate_rps, depth_tokens from load_steps where run_id = ?", [run_id])}
    samples = {sid: step for sid, step in store.db.execute(
        "select s.id, st.id from samples s join load_steps st on st.cell_id = s.cell_id where st.run_id = ?",
        [run_id])}
    store.close()
    assert {a for a, *_ in steps.values()} == {"load", "rate", "depth"} and len(samples) == (1 + 2) + 3 + 3  # streams, rate, depths
    out = build(db, root / "proj")["site_dir"]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    article = f"runs/run-{run_id}/" if (out / "runs" / f"run-{run_id}" / "index.html").exists() \
        else f"runs/run-{run_id}.html"
    yield {"base": f"http://127.0.0.1:{server.server_address[1]}/", "article": article, "run_id": run_id,
           "steps": steps, "samples": samples}
    server.shutdown()


def _row_links(page, element_id: str) -> list[str]:
    return page.evaluate(
        "id => [...document.getElementById(id).closest('tr').querySelectorAll('a[href]')].map(a => a.href)",
        element_id)


def _row_text(page, element_id: str) -> str:
    return page.evaluate("id => document.getElementById(id).closest('tr').innerText", element_id)


def _label(step: tuple) -> str:
    axis, streams, rate, depth = step
    if axis == "load":
        return f"{streams} stream"
    return f"{rate:g} requests/s" if axis == "rate" else f"depth {depth:,} tokens"


def test_each_step_row_links_to_its_samples_and_back(site, browser):
    run_id = site["run_id"]
    page = browser.new_page()
    page.goto(site["base"] + site["article"], wait_until="networkidle")
    article_url = page.url
    # the article: every step has a row, and its link goes to that step on the evidence page
    into = {}
    for step in site["steps"]:
        links = [h for h in _row_links(page, f"fig-step-{step}") if f"run-{run_id}-evidence" in h]
        assert [urldefrag(h)[1] for h in links] == [f"step-{step}"], (step, links)
        into[step] = links[0]
    page.goto(urldefrag(next(iter(into.values())))[0], wait_until="networkidle")
    for step, href in into.items():
        row = _row_text(page, urldefrag(href)[1])
        assert "tiny-a" in row and _label(site["steps"][step]) in row, (step, row)
        # the step's label links back to the step's own row in the article
        back = [h for h in _row_links(page, f"step-{step}") if urldefrag(h)[0] == article_url]
        assert back and {urldefrag(h)[1] for h in back} == {f"fig-step-{step}"}, (step, back)
    # every sample of every step is listed, and links back to its own step's row
    for sample, step in site["samples"].items():
        back = [urldefrag(h) for h in _row_links(page, f"sample-{sample}") if urldefrag(h)[0] == article_url]
        assert back and {frag for _, frag in back} == {f"fig-step-{step}"}, (sample, step, back)
    refused = next(s for s, (axis, *_, depth) in site["steps"].items() if depth == 16000000)
    assert "refused" in _row_text(page, f"step-{refused}")
    # one click on a back link scrolls the article to the step's row
    page.goto(f"{article_url}#fig-step-{refused}", wait_until="networkidle")
    assert page.evaluate(f"(() => {{ const r = document.getElementById('fig-step-{refused}').getBoundingClientRect();"
                         f" return r.top >= 0 && r.top < window.innerHeight; }})()")
    page.close()
