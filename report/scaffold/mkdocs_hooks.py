"""MkDocs hooks of a cardproof site (copied by ``cardproof report build``; named in mkdocs.yml).

Five jobs, the first three so that publishing one new run rebuilds only the pages it
changed (``cardproof.report.site_build`` runs mkdocs with ``dirty=True``):

- **Navigation of sections only.** Without a ``nav:`` of the author's, the
  navigation names the home page and each folder's index page, never a run:
  adding a run then changes no other page's HTML, and an unchanged page's
  HTML from an earlier build stays right.
- **Search index of every page, not only the rebuilt ones.** Each page's
  search entries are kept in ``.cardproof/search/`` per language; a build
  replaces the entries of the pages it rendered, drops those of pages that
  are gone and writes the merged index.
- **No raw records in the search index**: evidence pages are left out (see
  ``on_page_markdown``).
- **The feed plugin beside the i18n plugin.** mkdocs-static-i18n builds each
  further language by running the whole build again with the same plugin
  objects. mkdocs-rss-plugin turns ``date_from_meta.default_time`` from text
  into a time in ``on_config`` and, on the second run, warns that a time is no
  text -- a warning that fails ``mkdocs build --strict``. Before the next
  language's build starts (the i18n plugin starts it last in
  ``on_post_build``), the setting is text again.
- **A linear search de-duplication.** After the last language, mkdocs-static-i18n drops
  each other-language search entry that repeats a default-language one (same title and
  text, same location under ``de/``), comparing every entry with every other: 50 s of a
  publish at a thousand runs, in every build, full or dirty. ``_dedupe_search`` gives the
  same answer through a table keyed by title and text.
"""

import json
import re
from datetime import datetime
from pathlib import Path

from mkdocs.plugins import event_priority

# Folders whose index page is a section of the navigation, in this order; any
# other folder with an index page follows in name order.
SECTIONS = ("runs", "compare", "trends", "logs")
_RAW_RECORDS = re.compile(r"(^|/)run-\d+-evidence(\.[a-z]{2})?\.md$")
_state = {"auto_nav": None, "pages": [], "rendered": set()}


def section_nav(docs_dir) -> list:
    """The home page and one section per folder holding an ``index.md`` (its title from the folder name,
    as mkdocs' own navigation titles a folder, so nav_translations still apply)."""
    docs = Path(docs_dir)
    nav = ["index.md"] if (docs / "index.md").is_file() else []
    folders = sorted((p.parent.name for p in docs.glob("*/index.md")),
                     key=lambda n: (SECTIONS.index(n) if n in SECTIONS else len(SECTIONS), n))
    for name in folders:
        if name == "assets":
            continue
        nav.append({name.replace("-", " ").replace("_", " ").capitalize(): [f"{name}/index.md"]})
    return nav


def on_page_markdown(markdown, page, **kwargs):
    # An evidence page holds a run's raw records (every sample, every log line: ~0.6 MB of text
    # each); indexed, a year of runs would make a search index of a gigabyte that every reader's
    # browser loads. Readers find a run by its article (model names, campaign, headline), whose
    # every figure links to its evidence.
    if _RAW_RECORDS.search(page.file.src_uri):
        search = page.meta.get("search")
        page.meta["search"] = {**(search if isinstance(search, dict) else {}), "exclude": True}
    return markdown


def _dedupe_search(self, entries):
    """mkdocs-static-i18n's ``reconfigure_search_duplicates`` in one pass: remove, in place, every entry
    of another language whose title and text equal a default-language entry's and whose location ends
    with that entry's location."""
    prefixes = tuple(f"{lang}/" for lang in self.build_languages)
    others: dict[tuple, list[int]] = {}
    for i, entry in enumerate(entries):
        if entry["location"].startswith(prefixes):
            others.setdefault((entry["title"], entry["text"]), []).append(i)
    drop = set()
    for entry in entries:
        if not entry["location"].startswith(prefixes):
            for i in others.get((entry["title"], entry["text"]), ()):
                if entries[i]["location"].endswith(entry["location"]):
                    drop.add(i)
    if drop:
        entries[:] = [entry for i, entry in enumerate(entries) if i not in drop]


def _linear_i18n_search():
    try:
        from mkdocs_static_i18n.plugin import I18n
    except ImportError:
        return
    if hasattr(I18n, "reconfigure_search_duplicates"):
        I18n.reconfigure_search_duplicates = _dedupe_search


@event_priority(100)  # before the i18n plugin reads the navigation
def on_config(config, **kwargs):
    _linear_i18n_search()
    if _state["auto_nav"] is None:
        _state["auto_nav"] = not config.nav
    if _state["auto_nav"]:
        config.nav = section_nav(config.docs_dir)
    _state["rendered"] = set()
    return config


@event_priority(-200)  # after the i18n plugin chose this language's files
def on_files(files, config, **kwargs):
    _state["pages"] = [f.url for f in files.documentation_pages()]
    return files


@event_priority(-200)  # after the search plugin indexed the page
def on_page_context(context, page, **kwargs):
    _state["rendered"].add(page.url)
    return context


def _search_cache(config) -> Path:
    """One cache per language: the i18n plugin builds each language into the same site_dir."""
    i18n = config.plugins.get("i18n")
    lang = getattr(i18n, "current_language", None) or config.theme.get("language") or "default"
    project = Path(config.config_file_path).parent
    return project / ".cardproof" / "search" / f"{lang}.json"


def _merge_search(config) -> None:
    plugin = config.plugins.get("material/search") or config.plugins.get("search")
    index = getattr(plugin, "search_index", None)
    if index is None:
        return
    fresh: dict[str, list] = {}
    for entry in index.entries:
        fresh.setdefault(entry["location"].split("#", 1)[0], []).append(entry)
    path = _search_cache(config)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(cached, dict):
            cached = {}
    except (OSError, ValueError):
        cached = {}  # a full build follows when the cache is gone (site_build checks it first)
    merged = {}
    for url in _state["pages"]:
        merged[url] = fresh.get(url, []) if url in _state["rendered"] else cached.get(url, [])
    index.entries = [entry for entries in merged.values() for entry in entries]
    # Material keeps the previous build's index for dirty rebuilds and would mix the
    # first language's entries into the next language's index.
    plugin.search_index_prev = None
    plugin.is_dirty = False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


@event_priority(100)  # before the search plugin writes its index and the i18n plugin starts the next language
def on_post_build(config, **kwargs):
    _merge_search(config)
    rss = config.plugins.get("rss")
    if rss is None:
        return
    meta = rss.config.date_from_meta
    if isinstance(meta.default_time, datetime):
        meta.default_time = meta.default_time.strftime("%H:%M")
