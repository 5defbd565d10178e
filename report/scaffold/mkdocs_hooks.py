"""MkDocs hooks of a cardproof site (copied by ``cardproof report build``; named in mkdocs.yml).

Eight jobs, the first three so that publishing one new run rebuilds only the pages it
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
- **No feed link without a feed.** Material links both RSS feeds from every page's head
  whenever a plugin named ``rss`` is configured, enabled or not; without a site URL the
  plugin is off and those links would name files that are never written.
- **The feed's item titles as text**: see ``on_page_content``.
- **The site's name and description as text.** MkDocs and Material print them into the
  page unescaped (``<title>``, the logo's ``aria-label``, the description meta), and the
  feed plugin into XML partly unescaped; see ``on_pre_build``.
"""

import copy
import html
import json
import re
from datetime import datetime
from pathlib import Path

from markupsafe import Markup, escape
from mkdocs.plugins import event_priority

# Folders whose index page is a section of the navigation, in this order; any
# other folder with an index page follows in name order.
SECTIONS = ("runs", "compare", "trends", "logs")
_RAW_RECORDS = re.compile(r"(^|/)run-\d+-evidence(\.[a-z]{2})?\.md$")
_state = {"auto_nav": None, "pages": [], "rendered": set()}
#: the feed's template, beside this file (copied by report build): every value escaped, no empty <image>
FEED_TEMPLATE = "feed_rss.xml"


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
    rss = config.plugins.get("rss")
    if rss is not None and not rss.config.enabled:
        # the theme asks only whether the plugin is named (``"rss" in config.plugins``); a disabled
        # plugin's events all return at once, so it can go from the collection they are called through
        del config.plugins["rss"]
    return config


def _as_markup(value):
    """A text setting as HTML the theme can print anywhere: escaped once, and marked so, so the
    places that escape it (``| e``) leave it as it is. Character references in it (the environment
    hands site.toml's values as HTML, report/site_settings.py) are read first, so nothing is escaped twice."""
    if not isinstance(value, str) or not value:
        return value
    return value if isinstance(value, Markup) else escape(html.unescape(value))


def on_pre_build(config, **kwargs):
    # after every plugin's on_config, in each language's build: the i18n plugin sets the name there
    for key in ("site_name", "site_description", "site_author"):
        config[key] = _as_markup(config.get(key))
    _feed_texts(config)


def _feed_texts(config) -> None:
    """The feed's title and description as plain text, and the feed written through our template.

    The plugin reads the site name in its own on_config, before the i18n plugin sets the language's,
    and prints it unescaped in places (``<image>``, each item's ``<source>``): a title with ``&`` made
    invalid XML. One feed is written, at the site's root, listing both languages: it keeps the
    default language's name and description."""
    rss = config.plugins.get("rss")
    if rss is None or not rss.config.enabled or not hasattr(rss, "feed_created"):
        return
    i18n = config.plugins.get("i18n")
    if i18n is None or getattr(i18n, "current_language", None) == getattr(i18n, "default_language", None):
        _state["feed_text"] = {"title": config.site_name, "description": config.site_description,
                               "author": config.site_author}
    text = {k: html.unescape(str(v)) for k, v in _state.get("feed_text", {}).items() if v}
    for feed in (rss.feed_created, rss.feed_updated):
        if not rss.config.feed_title and "title" in text:
            feed.title = text["title"]
        if not rss.config.feed_description and "description" in text:
            feed.description = text["description"]
        if "author" in text:
            feed.author = text["author"]
    template = Path(__file__).with_name(FEED_TEMPLATE)
    if not template.is_file() or Path(rss.tpl_folder) == template.parent:
        return
    # The plugin copies the feed's stylesheet from its template folder: ours gets the plugin's copy.
    xsl = Path(rss.tpl_folder) / "default.xsl"
    mine = template.with_name(xsl.name)
    if xsl.is_file() and (not mine.is_file() or mine.read_bytes() != xsl.read_bytes()):
        mine.write_bytes(xsl.read_bytes())
    # the plugin's Jinja environment escapes templates named *.xml (select_autoescape)
    rss.tpl_folder, rss.tpl_file = template.parent, template


@event_priority(-100)  # after the feed plugin took the page as an item (its on_page_content)
def on_page_content(html_text, page, config, **kwargs):
    """The feed item's title as text. The plugin takes ``page.title``, which a run article's front matter
    holds as HTML (``mdsafe.yaml_title``: MkDocs and Material print it unescaped), and the feed's template
    escapes it again: a campaign "Tom & Jerry" was "Tom &amp;amp; Jerry" in the RSS feed and
    "Tom &amp; Jerry" in the JSON feed, where a title is plain text."""
    rss = config.plugins.get("rss")
    items = getattr(rss, "pages_to_filter", None) if rss is not None and rss.config.enabled else None
    if items:
        item = items[-1]
        if (item.title and getattr(item, "abs_path", None) is not None
                and str(item.abs_path) == str(Path(page.file.abs_src_path))
                and not getattr(item, "_cardproof_text", False)):
            item.title = html.unescape(str(item.title))
            item._cardproof_text = True  # once: the list outlives this language's build
    return html_text


@event_priority(-200)  # after the i18n plugin chose this language's files
def on_files(files, config, **kwargs):
    _state["pages"] = [f.url for f in files.documentation_pages()]
    return files


@event_priority(-200)  # after the search plugin indexed the page
def on_page_context(context, page, **kwargs):
    _state["rendered"].add(page.url)
    return context


def on_template_context(context, template_name, config, **kwargs):
    """The 404 page's language switch names each language's home page. The i18n plugin sets the switch
    per page and never for the static templates, so 404.html linked the page rendered last before it: in
    an incremental build another page than in a build from scratch."""
    if template_name == "404.html":
        i18n = config.plugins.get("i18n")
        homes = getattr(i18n, "extra_alternate", None)
        if homes:
            # the plugin sets it as an attribute of ``extra`` (which Jinja reads before the key): both
            config.extra["alternate"] = copy.deepcopy(homes)
            try:
                config.extra.alternate = copy.deepcopy(homes)
            except AttributeError:
                pass
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
    # The i18n plugin overrides a setting per language only when its type is exactly str: the next
    # language's build gets the text back (on_pre_build marks it again).
    for key in ("site_name", "site_description", "site_author"):
        if isinstance(config.get(key), Markup):
            config[key] = str(config[key])
    rss = config.plugins.get("rss")
    if rss is None:
        return
    meta = rss.config.date_from_meta
    if isinstance(meta.default_time, datetime):
        meta.default_time = meta.default_time.strftime("%H:%M")
