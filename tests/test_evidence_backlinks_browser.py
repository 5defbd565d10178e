"""Evidence and article point at each other, in Debian's headless Chromium.

A real run against the real llama-server (canaries on, probes on, the server
log captured), stored in real SQLite, built with mkdocs --strict and served
on loopback. Every link from the article into the evidence page lands on an
element of the row it names; every row of the evidence page (sample, canary
sample, probe exchange, load with its log lines) links back to the figure it
supports, and that figure is the one of the same model, class, gate, probe or
load. The sample marked median is the one whose rate the article shows.
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

_ROW_TEXT = "els => els.map(e => [e.id, (e.closest('tr') || e.closest('details') || e.closest('h3') " \
            "|| e.parentElement).innerText])"


@pytest.fixture(scope="module")
def site(own_router, tmp_path_factory):
    root = tmp_path_factory.mktemp("backlinks")
    db = root / "b.db"
    store = open_store(db)
    text = campaign_text(own_router.url, models=("tiny-b", "tiny-a"), classes=("short", "medium"),
                         reasoning=(False,), reps=3, max_tokens=8, pinned="tiny-a")
    text = text.replace('name = "test"', 'name = "test"\ncanaries = true').replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{own_router.log_path}"')
    text += ("\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
             "[probes]\nmax_tokens = 8\nrepeat = 1\ncode_timeout_s = 5\n")
    run_id = run_campaign(store, parse_campaign(text, "b.toml"), echo=lambda s: None).run_id
    db_ = store.db
    facts = {
        "cells": {cid: (model, cls) for cid, model, cls in db_.execute(
            "select cells.id, models.name, prompt_class from cells join models on models.id = model_id "
            "where run_id = ? and coalesce(kind, 'measure') = 'measure'", [run_id])},
        "samples": {sid: cid for sid, cid in db_.execute(
            "select samples.id, cell_id from samples where run_id = ? and coalesce(kind, 'measure') = 'measure'",
            [run_id])},
        "canaries": {sid: gate for sid, gate in db_.execute(
            "select samples.id, cells.canary_gate from samples join cells on cells.id = cell_id "
            "where samples.run_id = ? and samples.kind = 'canary'", [run_id])},
        "probes": {(model, probe) for model, probe in db_.execute(
            "select distinct models.name, probe from probe_results join models on models.id = model_id "
            "where run_id = ?", [run_id])},
        "loads": {lid: model for lid, model in db_.execute(
            "select loads.id, models.name from loads join models on models.id = model_id where run_id = ? "
            "and merged_into is null", [run_id])},
    }
    store.close()
    assert facts["canaries"] and facts["probes"] and facts["loads"]
    out = build(db, root / "proj")["site_dir"]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runs = out / "runs"
    article = f"runs/run-{run_id}/" if (runs / f"run-{run_id}" / "index.html").exists() else f"runs/run-{run_id}.html"
    yield {"base": f"http://127.0.0.1:{server.server_address[1]}/", "article": article, "run_id": run_id, **facts}
    server.shutdown()


def _links(page) -> list[str]:
    return page.eval_on_selector_all(".md-content a[href]", "els => els.map(e => e.href)")


def _rows(page) -> dict[str, str]:
    return {i: t for i, t in page.eval_on_selector_all("[id]", _ROW_TEXT)}


def _backlink_of(page, element_id: str, article_url: str) -> list[str]:
    """Links to the article inside the row (table row, probe block or load section) of ``element_id``."""
    return page.evaluate(
        """([id, article]) => {
            const el = document.getElementById(id);
            let box = el.closest('tr') || el.closest('details');
            if (!box && el.tagName === 'H3') {  // a load: its heading and the paragraph after it
                box = el.nextElementSibling;
            }
            return [...box.querySelectorAll('a[href]')].map(a => a.href)
                .filter(h => h.split('#')[0] === article);
        }""", [element_id, article_url])


def test_every_evidence_row_links_back_to_its_figure(site, browser):
    run_id = site["run_id"]
    page = browser.new_page()
    page.goto(site["base"] + site["article"], wait_until="networkidle")
    article_url = page.url
    article_rows = _rows(page)
    evidence_url = next(urldefrag(h)[0] for h in _links(page) if f"run-{run_id}-evidence" in h)
    page.goto(evidence_url, wait_until="networkidle")
    rows = _rows(page)

    def target_row(href: str) -> str:
        url, frag = urldefrag(href)
        assert url == article_url and frag in article_rows, href
        return article_rows[frag]

    # samples: each to the figure of its own cell, and that figure is in the row of its model
    for sid, cid in site["samples"].items():
        back = _backlink_of(page, f"sample-{sid}", article_url)
        assert [urldefrag(h)[1] for h in back] == [f"fig-cell-{cid}"] * len(back) and back, (sid, back)
        model, _cls = site["cells"][cid]
        assert model in target_row(back[0]), (sid, target_row(back[0]))
    # canary samples: to their gate's row in the gates table
    for sid, gate in site["canaries"].items():
        back = _backlink_of(page, f"sample-c{sid}", article_url)
        assert back and all(gate in target_row(h) for h in back), (sid, gate, back)
    # probe exchanges: each block to the verdict of the same model and probe
    blocks = page.eval_on_selector_all(
        "details", "els => els.map(d => [d.querySelector('summary').innerText, "
                   "[...d.querySelectorAll('a[href]')].map(a => a.href)])")
    probe_blocks = [(s, hrefs) for s, hrefs in blocks if " · " in s]
    assert {tuple(s.split(" · ", 1)) for s, _ in probe_blocks} == site["probes"]
    for summary, hrefs in probe_blocks:
        model, probe = summary.split(" · ", 1)
        back = [h for h in hrefs if urldefrag(h)[0] == article_url]
        assert back, summary
        row = target_row(back[0])
        assert model in row and probe in row, (summary, row)
    # loads with log lines: each section to the article's row of that load
    load_sections = [i for i in rows if re.fullmatch(r"load-\d+", i)]
    assert load_sections
    for anchor in load_sections:
        lid = int(anchor.split("-")[1])
        back = _backlink_of(page, anchor, article_url)
        if lid in site["loads"]:
            assert back, anchor
            row = target_row(back[0])
            assert site["loads"][lid] in row and row.split()[0] == str(lid), (anchor, row)
    # one click on a back link scrolls the article to the figure
    first = _backlink_of(page, f"sample-{next(iter(site['samples']))}", article_url)[0]
    page.goto(first, wait_until="networkidle")
    frag = urldefrag(first)[1]
    assert page.evaluate(f"(() => {{ const r = document.getElementById('{frag}').getBoundingClientRect();"
                         f" return r.top >= 0 && r.top < window.innerHeight; }})()")
    page.close()


def test_every_article_link_into_the_evidence_lands_on_its_row(site, browser):
    run_id = site["run_id"]
    page = browser.new_page()
    page.goto(site["base"] + site["article"], wait_until="networkidle")
    into = [h for h in _links(page) if f"run-{run_id}-evidence" in urldefrag(h)[0] and urldefrag(h)[1]]
    kinds = {re.sub(r"-c?\d+$", "", urldefrag(h)[1]) for h in into}
    assert {"cell", "sample", "load"} <= kinds, kinds
    page.goto(urldefrag(into[0])[0], wait_until="networkidle")
    rows = _rows(page)
    for href in into:
        frag = urldefrag(href)[1]
        assert frag in rows, href
        m = re.fullmatch(r"(cell|sample|sample-c|load)-(\d+)", frag.replace("sample-c", "sample-c-"))
        if not m:
            continue
        kind, n = m.group(1), int(m.group(2))
        if kind == "cell":
            model, cls = site["cells"][n]
            assert model in rows[frag] and cls in rows[frag], (frag, rows[frag])
        elif kind == "sample-c":
            assert site["canaries"][n] in rows[frag], (frag, rows[frag])
        elif kind == "load":
            assert site["loads"][n] in rows[frag] and str(n) in rows[frag], (frag, rows[frag])
    page.close()


def test_the_marked_median_is_the_figure_of_its_cell(site, browser):
    """Odd n: exactly one sample of each cell has its decode rate in bold (the median, marked in its own
    column), and that rate (3 decimals) rounds to the article's figure (1 decimal); even n: two are marked
    and the figure lies between them."""
    run_id = site["run_id"]
    page = browser.new_page()
    page.goto(site["base"] + site["article"], wait_until="networkidle")
    figures = dict(page.eval_on_selector_all(
        "[id^=fig-cell-]", "els => els.map(e => [e.id, e.parentElement.querySelector('a').innerText])"))
    page.goto(site["base"] + site["article"].replace(f"run-{run_id}", f"run-{run_id}-evidence"),
              wait_until="networkidle")
    header = page.eval_on_selector_all("table:first-of-type thead th", "els => els.map(e => e.innerText)")
    col = header.index("decode tok/s")
    marked: dict[int, list[float]] = {}
    for sid, cid in site["samples"].items():
        cells = page.evaluate(
            "id => [...document.getElementById(id).closest('tr').children]"
            ".map(td => [td.innerText, !!td.querySelector('strong')])",
            f"sample-{sid}")
        if cells[col][1]:  # the decode column's own median mark
            marked.setdefault(cid, []).append(float(cells[col][0].replace(",", "")))
    assert marked
    for cid, values in marked.items():
        figure = float(figures[f"fig-cell-{cid}"].replace(",", ""))
        assert len(values) in (1, 2), (cid, values)
        if len(values) == 1:
            # the evidence shows 3 decimals, the article 1: equal up to the article's rounding
            assert abs(values[0] - figure) <= 0.0501, (cid, values, figure)
        else:
            assert min(values) - 0.05 <= figure <= max(values) + 0.05, (cid, values, figure)
    page.close()
