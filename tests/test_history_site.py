"""Trend pages from a real llama-server series: three runs of one campaign on the tiny models, the
site built with ``mkdocs build --strict``, and the pages opened in Debian's headless Chromium."""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
from urllib.parse import urldefrag

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.llamabench import import_file
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from conftest import campaign_text

from browser import browser, needs_chromium  # noqa: F401  (fixture)

EXTRA = "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"


@pytest.fixture(scope="module")
def series_site(llama_server, tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("trend")
    db = root / "t.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short",), reps=3,
                         max_tokens=8) + EXTRA
    runs = [run_campaign(store, parse_campaign(text, "t.toml"), echo=lambda s: None).run_id for _ in range(3)]
    # the real llama-bench on the same file: its own series on tiny-a's page
    binary = llamacpp.find_binary("llama-bench")
    bench = subprocess.run([str(binary), "-m", str(tiny_models["tiny-a"]), "-p", "16", "-n", "8", "-r", "2", "-t", "2",
                            "-o", "json"], env=llamacpp.server_env(binary), capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr[-2000:]
    (root / "bench.json").write_text(bench.stdout)
    import_file(store, root / "bench.json")
    store.close()
    project = root / "proj"
    out = build(db, project)["site_dir"]  # mkdocs build --strict: raises on any warning
    return db, project, out, runs


def test_trend_pages_in_both_languages_link_every_point_to_its_run(series_site):
    db, project, out, runs = series_site
    trends = project / "site" / "trends"
    for model in ("tiny-a", "tiny-b"):
        en = (trends / f"trend-test-{model}.md").read_text()
        de = (trends / f"trend-test-{model}.de.md").read_text()
        for rid in runs:
            assert f"](../runs/run-{rid}.md)" in en and f"](../runs/run-{rid}.md)" in de
            assert f"](../runs/run-{rid}-evidence.md#cell-" in en
        assert "## Steps" in en and "## Stufen" in de and "Verläufe" not in en
        # every figure of a real run is a stored median: 3 valid samples per point
        assert en.count("n=3") >= 3
        assert (out / "trends" / f"trend-test-{model}.html").exists()
        assert (out / "de" / "trends" / f"trend-test-{model}.html").exists()
    assert (trends / "img" / "trend-test-tiny-a-decode-de.svg").read_text().startswith("<svg")
    # llama-bench's tg8 and pp16 on tiny-a's page, on their own, and in its decode chart as their own line
    page = (trends / "trend-test-tiny-a.md").read_text()
    assert "## llama-bench (in-process)" in page and "`tg8`" in page and "`pp16`" in page
    assert "llama-bench tg8" in (trends / "img" / "trend-test-tiny-a-decode-en.svg").read_text()
    assert "llama-bench" not in (trends / "trend-test-tiny-b.md").read_text()
    index = (project / "site" / "runs" / "index.md").read_text()
    assert "../trends/index.md" in index


def test_history_command_on_the_real_series(series_site):
    db, _, _, runs = series_site
    out = CliRunner().invoke(cli, ["history", "--db", str(db), "--model", "tiny-a"])
    assert out.exit_code == 0, out.output
    assert "test · tiny-a · short · reasoning off: 3 runs" in out.output


@needs_chromium
def test_trend_pages_open_in_chromium_without_errors(series_site, browser):  # noqa: F811
    _, _, out, runs = series_site
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for path in ("/trends/index.html", "/de/trends/index.html", "/trends/trend-test-tiny-a.html",
                     "/de/trends/trend-test-tiny-a.html"):
            page = browser.new_page()
            errors, foreign = [], []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(base) else None)
            resp = page.goto(base + path, wait_until="networkidle")
            assert resp.status == 200, path
            assert errors == [] and foreign == [], (path, errors, foreign)
            svgs = page.eval_on_selector_all("img[src$='.svg']", "els => els.map(e => [e.src, e.naturalWidth])")
            links = {urldefrag(h)[0] for h in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")}
            page.close()
            if "trend-test" in path:
                assert len(svgs) == 4 and all(w > 0 for _, w in svgs), svgs  # decode, prefill, TTFT, load
                for rid in runs:
                    target = next(u for u in links if u.endswith(f"/runs/run-{rid}.html"))
                    assert browser.new_page().goto(target).status == 200
                    assert ("/de/" in target) == path.startswith("/de/")
            else:
                assert any(u.endswith("/trends/trend-test-tiny-a.html") for u in links)
    finally:
        server.shutdown()
