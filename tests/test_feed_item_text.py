"""A feed item's title is the article's title as text, whatever the names in it.

Real parts: a generated store (tests/history_data.py) whose campaign name is
set afterwards to what a merged or hand-edited database may hold (markup, an
entity, ``]]>``, a control character, an emoji), the real ``cardproof report
build`` with ``mkdocs build --strict`` and the scaffold's feed plugin. Both
RSS feeds are read by an XML parser and both JSON feeds by ``json``.
"""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from history_data import make_db

URL = "https://lab.example.org/results/"
CAMPAIGN = "Tom & Jerry <b>x</b> ]]> &amp; \x01 \U0001F600"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("feed-items")
    make_db(root / "s.db", [{"level": 100.0}, {"level": 101.0}])
    conn = sqlite3.connect(root / "s.db")
    with conn:
        conn.execute("update campaigns set name = ?", [CAMPAIGN])
    conn.close()
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(root / "s.db"), "--project", str(root / "p"),
                                      "--site-url", URL])
    assert result.exit_code == 0, result.output
    return root / "p" / "build" / "site"


def _h1(page) -> str:
    """The article's heading as a reader sees it (entities decoded, the permalink's ¶ left out)."""
    text = page.read_text()
    start = text.index("<h1")
    out: list[str] = []
    parser = HTMLParser(convert_charrefs=True)
    parser.handle_data = out.append
    parser.feed(text[start:text.index("</h1>", start)])
    parser.close()
    return "".join(out).replace("¶", "").strip()


@pytest.mark.parametrize("name", ["feed_rss_created.xml", "feed_rss_updated.xml"])
def test_a_feed_items_title_is_the_articles_title_as_text(site, name):
    """Issue: the plugin takes the front matter's title, which is HTML (MkDocs prints it unescaped), and the
    feed's template escaped it again: readers showed "Tom &amp; Jerry" where the article says "Tom & Jerry"."""
    channel = ET.parse(site / name).getroot().find("channel")
    titles = {i.findtext("link"): i.findtext("title") for i in channel.iter("item")}
    assert len(titles) == 4
    for link, title in titles.items():
        page = site / link[len(URL):]
        assert title == _h1(page), (link, title)
        assert "Tom & Jerry <b>x</b> ]]> &amp;" in title and "&amp;amp;" not in title
    feed = json.loads((site / name.replace("rss", "json").replace(".xml", ".json")).read_text())
    assert {i["url"]: i["title"] for i in feed["items"]} == titles  # plain text there too
