"""Viewing the built site: a local server on loopback, and how to open it.

The site is built with relative links only (``use_directory_urls: false``),
so the same folder works opened from disk, at a server's root and under any
sub-path; ``serve`` can show the sub-path case before publishing.
"""

from __future__ import annotations

import functools
import http.server
from pathlib import Path
from urllib.parse import urlparse


class SiteMissing(Exception):
    """No built site where one was expected."""


def site_dir_of(project: Path) -> Path:
    """The built site of ``project``; SiteMissing names the folder when there is none."""
    site = Path(project) / "build" / "site"
    if not (site / "index.html").is_file():
        raise SiteMissing(f"no built site in {site} (no index.html); run: cardproof report build --project {project}")
    return site


def how_to_view(site: Path) -> list[str]:
    """Lines telling a reader the three ways to read the site."""
    site = Path(site).resolve()
    return [
        f"open from disk: {(site / 'index.html').as_uri()}",
        f"or serve it on this machine: cardproof report serve --project {site.parent.parent}",
        f"or publish the folder {site} as it is (at a domain's root or under any sub-path)",
    ]


def normalise_prefix(prefix: str) -> str:
    """'/sub/path/' from 'sub/path', '/sub/path' or '/'; rejects what is no URL path."""
    parts = [p for p in prefix.strip().split("/") if p]
    if any(p in (".", "..") or not p.isprintable() or any(c in p for c in "?#%\\") for p in parts):
        raise ValueError(f"--prefix {prefix!r} is not a plain URL path such as /results/")
    return "/" + "".join(p + "/" for p in parts)


def make_server(site: Path, port: int = 8000, prefix: str = "/") -> http.server.ThreadingHTTPServer:
    """A server for ``site`` on 127.0.0.1 only, under ``prefix``; outside it every path is a 404.

    Folders are not listed: a published host may not list them either, so a
    link that only works thanks to a listing must show as broken here.
    """
    prefix = normalise_prefix(prefix)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def send_head(self):
            path = urlparse(self.path).path
            if path == prefix.rstrip("/"):
                self.send_response(301)
                self.send_header("Location", prefix)
                self.end_headers()
                return None
            if not path.startswith(prefix):
                self.send_error(404, "outside the site's prefix")
                return None
            self.path = "/" + self.path[len(prefix):]
            return super().send_head()

        def list_directory(self, path):
            self.send_error(404, "no folder listings")
            return None

        def log_message(self, format, *args):  # the reader's terminal stays quiet
            pass

    handler = functools.partial(Handler, directory=str(site))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def config_warnings(project: Path) -> list[str]:
    """What keeps an older project's mkdocs.yml from working everywhere (one line each).

    ``scaffold`` never overwrites an author's mkdocs.yml, so a project made by
    an older cardproof keeps directory URLs (folders, which a browser lists
    from disk) and no offline search; the build says so instead of failing.
    """
    import yaml
    from mkdocs.utils.yaml import yaml_load

    path = Path(project) / "mkdocs.yml"
    try:
        config = yaml_load(path.read_text()) or {}  # mkdocs' loader: it knows !ENV
    except (OSError, yaml.YAMLError):
        return []  # mkdocs itself reports an unreadable config
    if not isinstance(config, dict):
        return []
    plugins = [p if isinstance(p, str) else next(iter(p), "") for p in config.get("plugins") or []
               if isinstance(p, (str, dict))]
    extra = config.get("extra") if isinstance(config.get("extra"), dict) else {}
    polyfills = extra.get("polyfills") if isinstance(extra.get("polyfills"), list) else []
    out = []
    if str(config.get("use_directory_urls", "true")).lower() != "false":
        out.append(f"{path}: use_directory_urls is not false: links point at folders, which do not open from disk")
    if "offline" not in plugins:
        out.append(f"{path}: no 'offline' plugin: search does not work from disk")
    elif not any("iframe-worker" in str(u) and not str(u).startswith(("http:", "https:")) for u in polyfills):
        out.append(f"{path}: the offline plugin's search shim would load from a CDN; "
                   "add extra: polyfills: [assets/cardproof/iframe-worker.js]")
    if "i18n" in plugins and extra.get("generator") is not False:
        out.append(f"{path}: the theme's footer says 'Made with' in English on every language's pages; "
                   "add extra: generator: false (and a copyright line per language)")
    return out
