"""Hostile content in every text column: nothing executes, nothing is injected, nothing private is published.

Two real runs of one campaign (probes, a pass rule, the server log captured)
against the real llama-server, a third run row copied from the second, rows
added to the tables a short run leaves empty (access log, canaries, capture
gaps, llama-bench, merges), then every text column of every row overwritten
with payloads (tests/hostile_data.py). The real report build follows
(mkdocs --strict), and every built HTML page is opened in Debian's headless
Chromium, served on loopback.
"""

from __future__ import annotations

import functools
import http.server
import sqlite3
import threading

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.mdsafe import MAX_SHOWN_CHARS
from conftest import campaign_text
from hostile_data import BIG, CLIENT_V4, CLIENT_V6, PAYLOADS, SECRETS, fill

from browser import launch, needs_chromium

pytestmark = needs_chromium

EXTRA = """
[probes]
run = ["tools"]
repeat = 1
max_tokens = 4

[rules]
fast = 'decode.short >= 1'

# a variant per model: its arguments, verdicts and notes are text columns the fill makes hostile
[variants]
models = ["tiny-b"]

[variants.sets]
t1 = ["-t", "1"]
"""

TITLE = '</title><script>window.__pwned="title"</script><img src=x data-pwn onerror="window.__pwned=1"> "x\ny: z'
SSTI = "SSTI{{ 7*7 }} {% raw %}x{% endraw %}"
STATUS = '<img src=x data-pwn onerror="window.__pwned=\'status\'">'

# Everything a payload could have made of the page: handlers, javascript: URLs, injected elements,
# and the Markdown markers turned into the element they name.
FIND_INJECTED = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.startsWith('on')) bad.push(`${el.tagName} ${a.name}`);
      if (/^\\s*javascript:/i.test(a.value)) bad.push(`${el.tagName} ${a.name}=${a.value}`);
    }
    if (el.hasAttribute('data-pwn') || el.id === 'pwnid') bad.push(`injected ${el.tagName}`);
  }
  const exact = (sel, re) => [...document.querySelectorAll(sel)]
    .filter(e => re.test(e.textContent.trim())).map(e => `${e.tagName}: ${e.textContent.trim().slice(0, 60)}`);
  bad.push(...exact('h1,h2,h3,h4,h5,h6', /^MDH/), ...exact('li', /^MDL item$/), ...exact('strong,em,b', /^MDB$/),
           ...exact('a', /^MDK( link|2)$/), ...exact('.admonition-title,summary', /^MDA$/), ...exact('td,th', /^MDT$/));
  bad.push(...[...document.querySelectorAll('img')].filter(e => e.alt === 'MDI').map(() => 'markdown image'));
  const holding = (sel, text) => [...document.querySelectorAll(sel)].filter(e => e.textContent.includes(text));
  bad.push(...holding('script', '__pwned').map(() => 'script'), ...holding('style', 'display:none').map(() => 'style'));
  if (document.body.innerText.includes('SSTI49')) bad.push('a template expression was evaluated');
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id).filter(i => /^(cell|sample|line|load|probe)-/.test(i));
  bad.push(...ids.filter((i, k) => ids.indexOf(i) !== k).map(i => `duplicate anchor ${i}`));
  return bad;
}"""


def _rows_for_empty_tables(db) -> None:
    """Rows in the tables a short run leaves empty, so their sections render too (text filled later)."""
    conn = sqlite3.connect(db)
    run_id, sample_id = conn.execute("select run_id, min(id) from samples").fetchone()
    source = conn.execute("select min(id) from log_sources").fetchone()[0]
    conn.execute("insert into canaries (run_id, gate, result, reason, sample_id, at) values (?, 'x', 'x', 'x', ?, "
                 "'2025-01-01T00:00:00+00:00')", [run_id, sample_id])
    conn.execute("insert into capture_gaps (source_id, at, reason, lines_skipped) values (?, "
                 "'2025-01-01T00:00:00+00:00', 'x', 3)", [source])
    imp = conn.execute("insert into llama_bench_imports (path, sha256, format, imported_at, host) values "
                       "('x', 'x', 'json', '2025-01-01T00:00:00+00:00', 'x')").lastrowid
    conn.execute("insert into llama_bench_results (import_id, row_index, test, build_commit, model_filename, "
                 "n_gpu_layers, avg_ts, stddev_ts, samples_ts_json, row_json, backends, gpu_info, type_k, type_v, "
                 "flash_attn, split_mode) values (?, 0, 'x', 'x', 'x', 99, 10.5, 0.5, '[10.0, 11.0]', "
                 "'{\"a\": \"b\"}', 'x', 'x', 'x', 'x', 'x', 'x')", [imp])
    conn.execute("insert into merges (source_path, at, report_json) values ('x', '2025-01-01T00:00:00+00:00', "
                 "'{\"note\": \"x\"}')")
    # a third run: the same campaign, a status from a merged database, no samples
    cols = [c[1] for c in conn.execute("pragma table_info(runs)") if c[1] != "id"]
    conn.execute(f"insert into runs ({', '.join(cols)}) select {', '.join(cols)} from runs where id = "
                 f"(select max(id) from runs)")
    conn.commit()
    conn.close()


def _access_log(db, run_id: int) -> None:
    """Access lines from LAN clients, as the log capture stores them (after the fill: real addresses)."""
    conn = sqlite3.connect(db)
    for i, client in enumerate((CLIENT_V4, CLIENT_V6, CLIENT_V4, "127.0.0.1")):
        conn.execute("insert into requests_seen (run_id, ts, client, method, path, status, source) values "
                     "(?, ?, ?, ?, ?, 200, 'recorded')",
                     [run_id, PAYLOADS[i], client, PAYLOADS[i + 4], PAYLOADS[i + 8]])
    conn.commit()
    conn.close()


@pytest.fixture(scope="module")
def hostile_site(own_router, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    db = root / "h.db"
    store = open_store(db)
    base = campaign_text(own_router.url, models=("tiny-b", "tiny-a"), reps=2, max_tokens=4, pinned="tiny-a")
    base = base.replace("request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{own_router.log_path}"')
    # four tokens always hit the length limit, and there is no card: keep the samples in the medians (charts)
    base += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    first = run_campaign(store, parse_campaign(base + EXTRA, "h.toml"), echo=lambda s: None).run_id
    second = run_campaign(store, parse_campaign(base.replace("repetitions = 2", "repetitions = 1"), "h2.toml"),
                          echo=lambda s: None).run_id
    store.close()
    _rows_for_empty_tables(db)
    written = fill(db, keep_status={first, second})
    with sqlite3.connect(db) as conn:  # the vector: a run status from a merged database
        conn.execute("update runs set status = ? where id = ?", [STATUS, second + 1])
        # a name that is an evidence anchor: a heading made from it must not take that id
        conn.execute("update models set name = 'line-1' where id = (select min(id) from models)")
        # where the payloads land varies with the number of log lines: two of them at a known place
        conn.execute("update runs set host = ? where id = ?", [SSTI, first])
        conn.execute("update campaigns set name = ?", [TITLE])  # page titles: front matter, <title>, search
        conn.execute("update loads set error_text = ? where id = (select min(id) from loads where run_id = ?)",
                     [BIG, first])
    _access_log(db, first)
    out = build(db, root / "proj")["site_dir"]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"base": f"http://127.0.0.1:{server.server_address[1]}", "site": out, "project": root / "proj",
           "runs": (first, second, second + 1), "written": written}
    server.shutdown()


@pytest.fixture(scope="module")
def pages(hostile_site):
    """Every built HTML page, opened in Chromium: what ran, what the DOM holds, what was requested."""
    from playwright.sync_api import sync_playwright

    base, site = hostile_site["base"], hostile_site["site"]
    out = {}
    rels = [html.relative_to(site).as_posix() for html in sorted(site.rglob("*.html"))]
    with sync_playwright() as p:
        browser = launch(p)
        for i in range(0, len(rels), 4):  # four pages loading at once: the two cores stay busy
            opened = []
            for rel in rels[i:i + 4]:
                page = browser.new_page()
                info = {"dialogs": [], "errors": [], "requests": []}
                page.on("dialog", lambda d, i=info: (i["dialogs"].append(d.message), d.dismiss()))
                page.on("pageerror", lambda exc, i=info: i["errors"].append(str(exc)))
                page.on("request", lambda r, i=info: i["requests"].append(r.url))
                page.goto(f"{base}/{rel}", wait_until="commit")
                opened.append((rel, page, info))
            for rel, page, info in opened:
                page.wait_for_load_state("load")
                info["pwned"] = page.evaluate("() => window.__pwned === undefined ? null : String(window.__pwned)")
                info["injected"] = page.evaluate(FIND_INJECTED)
                info["text"] = page.evaluate("() => document.body.textContent")  # collapsed blocks included
                info["title"] = page.title()
                out[rel] = info
                page.close()
        browser.close()
    return out


def test_the_database_really_was_hostile(hostile_site):
    written = hostile_site["written"]
    for table in ("campaigns", "runs", "models", "loads", "cells", "samples", "gate_results", "log_lines", "facts",
                  "probe_results", "rule_results", "canaries", "capture_gaps", "llama_bench_results"):
        assert written.get(table), (table, written)


def test_no_payload_runs_or_injects_markup_on_any_page(hostile_site, pages):
    first, second, third = hostile_site["runs"]
    for lang in ("", "de/"):
        for rid in (first, second, third):
            assert f"{lang}runs/run-{rid}.html" in pages
        assert f"{lang}compare/run-{second}-vs-{first}.html" in pages
    assert len(pages) >= 12
    for rel, info in pages.items():
        assert info["pwned"] is None and info["dialogs"] == [], (rel, info["pwned"], info["dialogs"])
        assert info["injected"] == [], (rel, info["injected"][:10])
        assert info["errors"] == [], (rel, info["errors"][:5])
        base = hostile_site["base"]
        strays = [u for u in info["requests"] if not u.startswith((base, "data:", "blob:")) or u.endswith("/x")]
        assert strays == [], (rel, strays)


def test_payloads_are_shown_as_the_text_they_are(hostile_site, pages):
    first, second, third = hostile_site["runs"]
    for page in ("runs/index.html", "de/runs/index.html", f"runs/run-{third}.html"):
        assert STATUS in pages[page]["text"], page  # the status of a merged run, as the text it is
    article = pages[f"runs/run-{first}.html"]["text"]
    assert SSTI in article  # shown, not evaluated
    assert TITLE.replace("\n", " ") in pages[f"runs/run-{first}.html"]["title"]
    assert f"[+{len(BIG) - MAX_SHOWN_CHARS} characters not shown]" in article  # the 1 MB error text, cut


def test_nothing_private_is_published_in_any_file(hostile_site):
    """Every file of the built site (search index, sitemaps, charts included) and every generated article."""
    files = [f for f in hostile_site["site"].rglob("*") if f.is_file()]
    files += list((hostile_site["project"] / "site").rglob("*.md"))
    assert any(f.name == "search_index.json" for f in files)
    for f in files:
        text = f.read_bytes().decode("utf-8", "replace")
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, (f, leaked)


def test_charts_hold_payloads_only_as_text(hostile_site):
    """An SVG opened on its own runs its scripts: the labels from data must be text in it."""
    import xml.etree.ElementTree as ET

    svgs = list(hostile_site["site"].rglob("*.svg"))
    assert len(svgs) >= 4
    labels = 0
    for svg in svgs:
        for el in ET.parse(svg).iter():
            assert not el.tag.endswith(("script", "foreignObject", "iframe", "img")), (svg, el.tag)
            assert not [a for a in el.attrib if a.lower().startswith("on") or a == "data-pwn"], (svg, el.attrib)
            labels += bool(el.text and "data-pwn" in el.text)
    assert labels, "the model names with payloads are in the charts, as text"


def test_search_results_show_payloads_as_text(hostile_site):
    """Material renders search hits from search_index.json into the page: typing a payload's words
    must find the pages and run nothing."""
    from playwright.sync_api import sync_playwright

    box = "input[data-md-component='search-query']"
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(hostile_site["base"] + "/runs/index.html", wait_until="networkidle")
        found = {}
        for query in ("onerror", "script", "MDK", "hunter2pw"):
            # Material reads the box on keyup: fill the whole query, then one keyup, so the worker is
            # asked exactly once and no earlier prefix's results ("h", "hu", ...) can be on show
            page.fill(box, "")
            page.locator(box).press("End")
            page.wait_for_function("() => document.querySelector('.md-search-result__meta')"
                                   ".textContent.includes('Type to start')", timeout=30_000)
            page.fill(box, query)
            page.locator(box).press("End")
            page.wait_for_function("() => !document.querySelector('.md-search-result__meta')"
                                   ".textContent.includes('Type to start')", timeout=30_000)
            # the list is filled in batches while the reader scrolls: read until three reads agree
            counts: list[int] = []
            for _ in range(120):
                page.wait_for_timeout(250)
                counts.append(page.eval_on_selector_all(".md-search-result__item", "els => els.length"))
                if len(counts) >= 3 and len(set(counts[-3:])) == 1:
                    break
            found[query] = counts[-1]
            assert page.evaluate("() => window.__pwned === undefined") and dialogs == [], (query, dialogs)
            assert page.evaluate(FIND_INJECTED) == [], query
        browser.close()
    assert found["onerror"] and found["script"], found  # the payloads are in the index, as text
    assert found["hunter2pw"] == 0  # and the password is not
