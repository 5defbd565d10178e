"""A feed of the run articles (RSS and JSON Feed, by mkdocs-rss-plugin) for readers who follow new results.

A feed item needs an absolute URL, so the feed is built only when the site's
public address is known: ``cardproof report build --site-url URL`` (or
``publish``) sets ``CARDPROOF_SITE_URL`` and ``CARDPROOF_FEED`` for the mkdocs
run, which the scaffold's mkdocs.yml reads (``!ENV``). Without an address the
site still works at any prefix and from disk, without a feed. Nothing is
fetched at build time (no git, no remote images).

Each run article gets its start time as ``date`` in its front matter (the
feed's item date), written here from the store's timestamp, never from text:
a date the plugin cannot parse would fail ``mkdocs build --strict``.
"""

from __future__ import annotations

import contextlib
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

from .i18n import LANGUAGES
from cardproof.daemon.store.file import connect_readonly

#: the front matter's date format, as mkdocs.yml tells the plugin (date_from_meta.datetime_format)
DATE_FORMAT = "%Y-%m-%d %H:%M"
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.S)


class FeedError(ValueError):
    """The site URL given for the feed is no absolute http(s) URL."""


# MkDocs and the theme print the site URL into attributes unescaped (the canonical link), and a URL has
# no need of these unencoded: refused rather than published (%-encode them). An `&` would also be read
# as the start of a character reference there.
_URL_BAD = re.compile(r"""[\s"'<>&`\\{}|^\x00-\x1f\x7f]""")


def _unprintable(url: str) -> bool:
    """A character no address needs written as it is: a control, format or private character, a surrogate,
    an unassigned one (U+FFFF: no XML document, such as the feed, may hold it) or a separator."""
    return not url.isprintable()


def check_site_url(url: str) -> str:
    """``url`` as the site's base (ending in ``/``), or FeedError naming what is wrong."""
    parts = urlsplit(url.strip())
    if (parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment
            or _URL_BAD.search(url.strip()) or _unprintable(url.strip())):
        raise FeedError(f"--site-url {url!r}: give the site's absolute address, e.g. https://user.github.io/results/ "
                        "(no query or fragment; spaces, quotes, &, < and > %-encoded)")
    return url.strip() if url.strip().endswith("/") else url.strip() + "/"


@contextlib.contextmanager
def feed_environment(site_url: str | None):
    """The environment the mkdocs run reads its site_url and feed switch from (restored after)."""
    values = {"CARDPROOF_SITE_URL": check_site_url(site_url), "CARDPROOF_FEED": "true"} if site_url else {}
    old = {k: os.environ.get(k) for k in ("CARDPROOF_SITE_URL", "CARDPROOF_FEED")}
    for k in old:
        os.environ.pop(k, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def date_line(started) -> str | None:
    """The front matter's ``date:`` line for a run that started at ``started``; None when unreadable."""
    try:
        when = datetime.fromisoformat(str(started))
    except (TypeError, ValueError):
        return None  # no readable start: the article carries no date, the feed lists it undated
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return f'date: "{when.strftime(DATE_FORMAT)}"'


def dated(text: str, line: str | None) -> str:
    """``text`` with ``line`` as the front matter's ``date:`` (an earlier one replaced); as it was without one."""
    text = str(text)  # plain text: an MD page would escape what is joined to it
    m = _FRONT.match(text)
    if not m or line is None:
        return text
    lines = [ln for ln in m.group(1).split("\n") if not ln.startswith("date:")] + [line]
    return "---\n" + "\n".join(lines) + "\n---\n" + text[m.end():]


def date_articles(db_path: Path, docs_dir: Path) -> None:
    """Put each run's start time into its articles' front matter as ``date`` (the feed's item date).

    The report build dates each article as it renders it (``dated``); this is for pages written otherwise.
    """
    conn = connect_readonly(db_path)
    try:
        runs = conn.execute("select id, started_at from runs").fetchall()
    finally:
        conn.close()
    for run_id, started in runs:
        line = date_line(started)
        if line is None:
            continue
        for lang in LANGUAGES:
            page = docs_dir / "runs" / (f"run-{run_id}.md" if lang == "en" else f"run-{run_id}.{lang}.md")
            if page.exists():
                _set_date(page, line)


def _set_date(page: Path, line: str) -> None:
    text = page.read_text()
    new = dated(text, line)
    if new != text:
        page.write_text(new)
