"""The site build: a full ``mkdocs build --strict`` when anything site-wide changed, otherwise only the
pages whose Markdown changed (one new run published in under a minute at 1,000 runs).

A full build renders every page of both languages (minutes at a thousand runs). mkdocs' own ``dirty``
build renders only pages whose Markdown is newer than their HTML; on its own it is not safe, and
three things make it so here:

- the navigation names sections, never runs (scaffold/mkdocs_hooks.py), so a new run changes no
  other page's HTML; the pages the navigation names are rendered every time, for their titles;
- each page's search entries are kept per language and merged into the index (mkdocs_hooks.py);
- whatever every page shows -- mkdocs.yml, the hooks, the theme and plugin versions, the site's name,
  URL and feed switch, the navigation's titles -- is a stamp; when it differs from the last good
  build's, or a search cache or the home page is missing, the build is a full one.

A page whose Markdown is gone (a run removed from the store) makes the build a full one: an unchanged
page may still link to it. With a feed the newest run articles are rendered every time, as the feed
lists the pages rendered in the build.

Run as ``python -m cardproof.report.site_build PROJECT [--full]``; the exit status is mkdocs' and its
warnings are on stderr as ``WARNING - ...`` lines.

In short, ``site.py``, ``site_build.py``: the MkDocs scaffold and ``mkdocs build
--strict``, run as mkdocs' incremental (``--dirty``) build made whole: a fingerprint of everything
all pages share (``.cardproof/site-build.json``) forces a full build when it changes; the navigation
names sections only (``scaffold/mkdocs_hooks.py``), each page's search entries are cached per
language in ``.cardproof/search/`` and merged; evidence pages stay out of the search index;
mkdocs-static-i18n's quadratic search de-duplication is replaced by a one-pass twin
(``_dedupe_search``, tests/test_site_search_dedupe.py)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from importlib import metadata
from pathlib import Path

STAMP = Path(".cardproof") / "site-build.json"
#: the languages besides the default one, each built into its own folder (mkdocs-static-i18n, suffix)
OTHER_LANGUAGES = ("de",)
#: run articles rendered again on every build when the feed is on: the feed lists the newest ones
FEED_RUNS = 20
_RUN_PAGE = re.compile(r"run-(\d+)(?:\.[a-z]{2})?\.md$")
_TITLE = re.compile(r"^(?:title:\s*(.+)|#\s+(.+))$", re.M)
_KEPT = {"404.html"}


class _DropDirtyWarning(logging.Filter):
    """mkdocs warns on every dirty build that it 'will likely lead to inaccurate navigation'; the
    section-only navigation is why it does not here, and under --strict the warning would fail the build."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "A 'dirty' build is being performed" not in record.getMessage()


def _versions() -> list[str]:
    out = []
    for dist in ("mkdocs", "mkdocs-material", "mkdocs-static-i18n", "mkdocs-rss-plugin", "cardproof"):
        try:
            out.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist}=?")
    return out


def _nav_titles(docs: Path) -> list[str]:
    """The title line of every page the navigation can name, in every language."""
    titles = []
    for page in sorted([docs / "index.md", *docs.glob("*/index.md"), *docs.glob("index.*.md"),
                        *docs.glob("*/index.*.md")]):
        try:
            head = page.read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError:
            continue
        m = _TITLE.search(head)
        titles.append(f"{page.relative_to(docs)}:{m.group(0) if m else ''}")
    return titles


def stamp_of(project: Path, docs: Path) -> str:
    """What every page's HTML depends on besides its own Markdown, as one hash."""
    h = hashlib.sha256()
    for name in ("mkdocs.yml", ".cardproof/mkdocs_hooks.py"):
        try:
            h.update((project / name).read_bytes())
        except OSError:
            h.update(b"missing " + name.encode())
    try:
        names = set(re.findall(r"!ENV\s*\[?\s*([A-Za-z_][A-Za-z0-9_]*)", (project / "mkdocs.yml").read_text()))
    except OSError:
        names = set()
    env = sorted((k, os.environ.get(k)) for k in names)  # the site-wide values mkdocs.yml reads
    h.update(json.dumps([env, _versions(), _nav_titles(docs), sorted(p.name for p in docs.iterdir() if p.is_dir())])
             .encode())
    return h.hexdigest()


def _sources_of(rel: Path, docs: Path) -> list[Path]:
    """The Markdown files an output page can come from (a German page falls back to the English one)."""
    parts = rel.parts
    lang = parts[0] if len(parts) > 1 and parts[0] in OTHER_LANGUAGES else None
    inner = Path(*parts[1:]) if lang else rel
    stem = inner.with_suffix("")
    found = [docs / f"{stem}.md"]
    if lang:
        found.insert(0, docs / f"{stem}.{lang}.md")
    return found


def remove_stale_pages(out: Path, docs: Path) -> list[Path]:
    """Delete built pages whose Markdown is gone (a dirty build never deletes); the removed paths."""
    removed = []
    for html in out.rglob("*.html"):
        rel = html.relative_to(out)
        if rel.parts[0] in ("assets", "search") or str(rel) in _KEPT:
            continue
        if not any(src.is_file() for src in _sources_of(rel, docs)):
            html.unlink()
            removed.append(rel)
    for path in out.rglob("*"):  # downloads, charts, exports: files copied from docs
        rel = path.relative_to(out)
        if (path.is_file() and path.suffix not in (".html", ".xml", ".gz") and rel.parts[0] not in ("assets", "search")
                and (docs / rel.parts[0]).is_dir() and not (docs / rel).exists()):
            path.unlink()
            removed.append(rel)
    return removed


def _outputs_of(src_rel: Path) -> list[Path]:
    """The HTML files built from one Markdown file, in every language."""
    name = src_rel.name
    m = re.match(r"^(.*?)(?:\.([a-z]{2}))?\.md$", name)
    stem, lang = m.group(1), m.group(2)
    page = src_rel.with_name(stem + ".html")
    if lang in OTHER_LANGUAGES:
        return [Path(lang) / page]
    return [page] + [Path(lang) / page for lang in OTHER_LANGUAGES]


def force_rebuild(out: Path, docs: Path, feed: bool) -> None:
    """Delete the HTML of pages that must be rendered on every build: the ones the navigation names (their
    titles appear on every page rendered now) and, with a feed, the newest run articles (the feed lists
    the pages rendered in this build)."""
    sources = [docs / "index.md", *docs.glob("*/index.md")]
    if feed:
        runs = sorted(((int(m.group(1)), p) for p in (docs / "runs").glob("run-*.md")
                       if (m := _RUN_PAGE.fullmatch(p.name))), key=lambda x: x[0])
        newest = set(sorted({rid for rid, _ in runs})[-FEED_RUNS:])
        sources += [p for rid, p in runs if rid in newest]
    for src in sources:
        for rel in _outputs_of(src.relative_to(docs)):
            (out / rel).unlink(missing_ok=True)


def _caches_whole(caches: Path) -> bool:
    """A search cache for every language, each readable: otherwise the merged index would lose pages."""
    for lang in ("en", *OTHER_LANGUAGES):
        try:
            if not isinstance(json.loads((caches / f"{lang}.json").read_text(encoding="utf-8")), dict):
                return False
        except (OSError, ValueError):
            return False
    return True


def _template_cache() -> Path | None:
    """The user's folder for compiled theme templates (``$XDG_CACHE_HOME/cardproof/jinja``), or None where
    it cannot be made or is not this user's alone: Jinja loads code from it."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "cardproof" / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = folder.stat()
    except (OSError, RuntimeError):
        return None
    if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
        return None
    return folder


def _template_store(folder: Path):
    """Jinja's bytecode cache, kept as ``<key>.code`` files: a header naming Python's bytecode magic, the
    Jinja version and the template source's checksum, then the compiled code (``marshal``, as Python's
    own ``__pycache__``). A file whose header does not match, that is cut short or damaged, or that
    cannot be written (a full disk) is no cache: the template is compiled, never an error."""
    import contextlib
    import importlib.util
    import marshal
    import tempfile

    import jinja2

    magic = b"cardproof-jinja " + importlib.util.MAGIC_NUMBER.hex().encode() + b" " + jinja2.__version__.encode()

    class Store(jinja2.BytecodeCache):
        def load_bytecode(self, bucket):
            try:
                head, _, code = (folder / f"{bucket.key}.code").read_bytes().partition(b"\n")
                if head == magic + b" " + bucket.checksum.encode():
                    bucket.code = marshal.loads(code)
            except Exception:  # noqa: BLE001 -- missing, cut or damaged: compiled again
                bucket.reset()

        def dump_bytecode(self, bucket):
            data = magic + b" " + bucket.checksum.encode() + b"\n" + marshal.dumps(bucket.code)
            try:
                f = tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False)
            except OSError:
                return
            try:
                with f:
                    f.write(data)
                os.replace(f.name, folder / f"{bucket.key}.code")  # whole or not at all, for a build beside
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(f.name)

    return Store()


def compile_templates_once() -> None:
    """Material's templates compiled once, not at every build: mkdocs makes a new Jinja environment per
    build (and per language), and compiling the theme's 73 templates was about a third of a build of
    a few changed pages. Each compiled template is kept by its name and its source's checksum, so an
    upgraded theme compiles again (:func:`_template_store`)."""
    from mkdocs import theme as mk_theme

    folder = _template_cache()
    if folder is None or getattr(mk_theme.Theme.get_env, "_cardproof_cached", False):
        return
    cache = _template_store(folder)
    made = mk_theme.Theme.get_env

    def get_env(self):
        env = made(self)
        env.bytecode_cache = cache
        return env

    get_env._cardproof_cached = True
    mk_theme.Theme.get_env = get_env


def build_site(project: Path, full: bool = False) -> str:
    """Build the site of ``project``; 'full' or 'dirty', as it was built. Raises mkdocs' Abort."""
    from mkdocs import config as mkconfig
    from mkdocs.commands.build import build

    project = Path(project).resolve()
    compile_templates_once()
    cfg = mkconfig.load_config(str(project / "mkdocs.yml"), strict=True)
    docs, out = Path(cfg.docs_dir), Path(cfg.site_dir)
    stamp_path = project / STAMP
    stamp = stamp_of(project, docs)
    try:
        last = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        last = {}
    caches = project / ".cardproof" / "search"
    # An author's own nav: may name any page, whose title an unchanged page's HTML then shows stale.
    dirty = (not full and not cfg.nav and isinstance(last, dict) and last.get("stamp") == stamp
             and (out / "index.html").is_file() and _caches_whole(caches))
    stamp_path.unlink(missing_ok=True)  # a failed build leaves no stamp: the next one is full
    if dirty and remove_stale_pages(out, docs):
        # a page is gone: an unchanged page may still link to it, and only a full build checks that
        dirty = False
    if dirty:
        force_rebuild(out, docs, feed=os.environ.get("CARDPROOF_FEED", "").lower() == "true")
        # mkdocs-static-i18n builds the other languages dirty only when the command line says so
        sys.argv = [sys.argv[0], "build", "--dirty"]
    else:
        sys.argv = [sys.argv[0], "build"]
        for cache in caches.glob("*.json"):
            cache.unlink()
    cfg.plugins.on_startup(command="build", dirty=dirty)
    try:
        build(cfg, dirty=dirty)
    finally:
        cfg.plugins.on_shutdown()
    stamp_path.parent.mkdir(parents=True, exist_ok=True)
    stamp_path.write_text(json.dumps({"stamp": stamp, "kind": "dirty" if dirty else "full"}))
    return "dirty" if dirty else "full"


def main(argv: list[str]) -> int:
    from mkdocs.exceptions import Abort, MkDocsException

    if not argv or argv[0].startswith("-"):
        print("usage: python -m cardproof.report.site_build PROJECT [--full]", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s - %(message)s"))
    handler.addFilter(_DropDirtyWarning())
    log = logging.getLogger("mkdocs")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    for name in ("mkdocs", "mkdocs.commands.build"):
        logging.getLogger(name).addFilter(_DropDirtyWarning())
    try:
        kind = build_site(Path(argv[0]), full="--full" in argv[1:])
    except (Abort, MkDocsException) as exc:
        print(f"ERROR - {exc}", file=sys.stderr)
        return 1
    print(f"site build: {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
