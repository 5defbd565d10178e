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
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.server.llamacpp import free_port
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from site_html import broken_links, pages, read

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


#: a site title that is no XML text as it is, with text that only looks like markup (shown as written)
TITLE = """Tom & Jerry's "cards" &lt; &amp; {{ 7*7 }}"""
DESCRIPTION = "Q&A: what 'fast' means & why"


@pytest.fixture(scope="module")
def with_url(store_path, tmp_path_factory):
    """The site built with a site URL and a site.toml whose title is no XML text, with every HTTP proxy
    pointed at a closed port: nothing may be fetched while building."""
    project = tmp_path_factory.mktemp("feed-url") / "p"
    project.mkdir()
    (project / "site.toml").write_text(f"[site]\ntitle = {json.dumps(TITLE)}\ndescription = {json.dumps(DESCRIPTION)}\n")
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.MonkeyPatch.context() as mp:
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
            mp.setenv(var, closed)
        mp.delenv("NO_PROXY", raising=False)
        mp.delenv("no_proxy", raising=False)
        result = _build(store_path, project, "--site-url", URL.rstrip("/"))
    assert result.exit_code == 0, result.output
    return project / "build" / "site"


@pytest.fixture(scope="module")
def without_url(store_path, tmp_path_factory):
    project = tmp_path_factory.mktemp("feed-none") / "p"
    result = _build(store_path, project)
    assert result.exit_code == 0, result.output
    return project / "build" / "site"


def test_with_a_site_url_the_feed_lists_every_article_in_both_languages(store_path, with_url):
    site = with_url
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


@pytest.mark.parametrize("name", ["feed_rss_created.xml", "feed_rss_updated.xml"])
def test_both_feeds_parse_as_xml_whatever_the_site_title(with_url, name):
    """Issue: a title with `&` made both feeds invalid XML (raw in <image> and each item's <source>), and
    <image> named `None` as its URL. The title comes back from the parser as the text site.toml gave."""
    channel = ET.parse(with_url / name).getroot().find("channel")
    assert channel.findtext("title") == TITLE and channel.findtext("description") == DESCRIPTION
    sources = [s.text for s in channel.iter("source")]
    assert len(sources) == 2 and set(sources) == {TITLE}
    assert [u.text for u in channel.iter("url") if not (u.text or "").startswith(URL)] == []  # no <url>None</url>
    json_name = name.replace("rss", "json").replace(".xml", ".json")
    feed = json.loads((with_url / json_name).read_text())
    assert feed["title"] == TITLE and feed["description"] == DESCRIPTION  # plain text there, not HTML


def test_without_a_site_url_there_is_no_feed_and_the_site_stays_relative(without_url):
    site = without_url
    assert not list(site.glob("feed_*"))
    # no absolute address is invented: no canonical link, so the pages work at any prefix and from disk
    assert 'rel="canonical"' not in (site / "runs" / "run-1.html").read_text()


def test_without_a_site_url_no_page_links_a_feed(without_url):
    """Issue: every page's head linked feed_rss_created.xml and feed_rss_updated.xml, never written."""
    linked = [(page.name, attrs) for page in pages(without_url) for tag, attrs in read(page).elements
              if tag == "link" and "rss" in (dict(attrs).get("type") or "")]
    assert linked == []


@pytest.mark.parametrize("which", ["with_url", "without_url"])
def test_every_link_of_every_page_names_a_file(request, which):
    """Every href and src of every built page, <link> in the head included, resolves to a file of the
    site: relative, so at a root, under a sub-path and from disk alike (the feed links with a site URL)."""
    site = request.getfixturevalue(which)
    broken, followed = broken_links(site, URL if which == "with_url" else None)
    assert broken == []
    assert followed > 200
    heads = [dict(attrs)["href"] for tag, attrs in read(site / "de" / "runs" / "run-1.html").elements
             if tag == "link" and "rss" in (dict(attrs).get("type") or "")]
    assert heads == (["../../feed_rss_created.xml", "../../feed_rss_updated.xml"] if which == "with_url" else [])


@pytest.mark.parametrize("bad", ["results/", "ftp://host/x/", "https://", "https://host/x/?a=1", "javascript:alert(1)",
                                 # printed unescaped into attributes (the canonical link): refused, not escaped
                                 'https://host/x"onmouseover="alert(1)/', "https://host/a&copy=1/", "https://host/a b/",
                                 "https://host/a'b/", "https://host/<b>/",
                                 # no XML document may hold U+FFFF (the feed's links); controls no address needs
                                 "https://host/a\uffffb/", "https://host/a\x85b/", "https://host/\u202eb/"])
def test_a_site_url_that_is_no_address_is_refused_in_one_line(tmp_path, bad):
    result = _build(tmp_path / "none.db", tmp_path / "p", "--site-url", bad)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--site-url" in result.output
    assert not (tmp_path / "p").exists()
