"""A built site's HTML read with a real parser (html.parser), as a browser's tokenizer reads it.

``elements`` lists every start tag with its attributes (entities decoded), so a test sees an
attribute a payload made exactly as a browser would; ``broken_links`` follows every ``href`` and
``src`` of every page (``<link>`` in the head included) to the file it names.
"""

from __future__ import annotations

import posixpath
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Reader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, attrs))
        self._in_title = tag == "title"

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, attrs))

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def read(page: Path) -> _Reader:
    reader = _Reader()
    reader.feed(page.read_text(encoding="utf-8"))
    reader.close()
    return reader


def pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def broken_links(site: Path, site_url: str | None = None) -> tuple[list[str], int]:
    """Every ``href``/``src`` of every page of ``site`` that names no file (as ``page: link``), and how
    many links were followed. A relative link must resolve inside the site from the page's folder
    (the site then works at a root, under a sub-path and from disk); a link into the site by its
    address or, on the 404 page alone (served at any depth, mkdocs writes it root-absolute), by its
    path is followed too. A link to another host is no file of the site and is not followed."""
    base = urlsplit(site_url) if site_url else None
    root_path = base.path if base else "/"
    broken, followed = [], 0
    for page in pages(site):
        rel_page = page.relative_to(site).as_posix()
        for _tag, attrs in read(page).elements:
            for name, value in attrs:
                if name not in ("href", "src") or value is None:
                    continue
                parts = urlsplit(value)
                if parts.scheme in ("mailto", "data") or (not parts.scheme and not parts.netloc and not parts.path):
                    continue  # an anchor on the page itself, an address, inline data
                if parts.scheme or parts.netloc:
                    if base is None or (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
                        if parts.scheme in ("http", "https"):
                            continue  # another host
                        broken.append(f"{rel_page}: {value}")  # javascript:, file:, ...
                        continue
                    path = parts.path
                    if not path.startswith(root_path):
                        broken.append(f"{rel_page}: {value}")
                        continue
                    target = path[len(root_path):]
                elif parts.path.startswith("/"):
                    if rel_page != "404.html" or not parts.path.startswith(root_path):
                        broken.append(f"{rel_page}: {value}")  # root-absolute: breaks under a sub-path
                        continue
                    target = parts.path[len(root_path):]
                else:
                    target = posixpath.normpath(posixpath.join(posixpath.dirname(rel_page), parts.path))
                target = unquote(target) or "index.html"
                followed += 1
                if target.startswith("../") or not (site / target).is_file():
                    broken.append(f"{rel_page}: {value}")
    return broken, followed
