"""A feed of the run articles (mkdocs-rss-plugin) beside the sitemap, built offline, only with a site URL.

Real parts: a run measured against the real llama-server, the real
``cardproof report build`` command with ``mkdocs build --strict`` and the
real plugins of the scaffold (rss, i18n, offline). Offline is checked by
pointing every HTTP proxy at a closed port: a request at build time would
fail and, through the plugin's warning, fail the strict build.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.llamacpp import free_port
from cardproof.daemon.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text

URL = "https://user.example.org/results/"


@pytest.fixture(scope="module")
def store_path(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("feed")
    store = open_store(root / "f.db")
    text = campaign_text(llama_server.url, models=("tiny-a",), classes=("short",), reps=2, max_tokens=8)
    run_campaign(store, parse_campaign(text, "f.toml"), echo=lambda s: None)
    store.close()
    return root / "f.db"


def _build(db, project, *extra):
    return CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project), *extra])


def test_with_a_site_url_the_feed_lists_every_article_in_both_languages(store_path, tmp_path, monkeypatch):
    closed = f"http://127.0.0.1:{free_port()}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, closed)  # nothing may be fetched while building
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    result = _build(store_path, tmp_path / "p", "--site-url", URL.rstrip("/"))
    assert result.exit_code == 0, result.output
    site = tmp_path / "p" / "build" / "site"
    rss = ET.parse(site / "feed_rss_created.xml").getroot()
    links = [i.findtext("link") for i in rss.iter("item")]
    assert sorted(links) == [f"{URL}de/runs/run-1.html", f"{URL}runs/run-1.html"]
    store = open_store(store_path, mode="ro")
    started = store.db.execute("select started_at from runs").fetchone()[0]
    store.close()
    dates = {i.findtext("pubDate") for i in rss.iter("item")}
    # the run's start (minute precision, UTC) is the item date: '30 Nov 2026 16:25:00 +0000'
    start = datetime.fromisoformat(started).astimezone(timezone.utc)
    assert dates == {start.strftime("%a, %d %b %Y %H:%M:00 +0000")}
    feed = json.loads((site / "feed_json_created.json").read_text())
    assert {i["url"] for i in feed["items"]} == set(links)
    assert URL in (site / "sitemap.xml").read_text()


def test_without_a_site_url_there_is_no_feed_and_the_site_stays_relative(store_path, tmp_path):
    result = _build(store_path, tmp_path / "p")
    assert result.exit_code == 0, result.output
    site = tmp_path / "p" / "build" / "site"
    assert not list(site.glob("feed_*"))
    # no absolute address is invented: no canonical link, so the pages work at any prefix and from disk
    assert 'rel="canonical"' not in (site / "runs" / "run-1.html").read_text()


@pytest.mark.parametrize("bad", ["results/", "ftp://host/x/", "https://", "https://host/x/?a=1", "javascript:alert(1)"])
def test_a_site_url_that_is_no_address_is_refused_in_one_line(tmp_path, bad):
    result = _build(tmp_path / "none.db", tmp_path / "p", "--site-url", bad)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--site-url" in result.output
    assert not (tmp_path / "p").exists()
