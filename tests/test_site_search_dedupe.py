"""The hooks' search de-duplication gives the answer of mkdocs-static-i18n's own, in one pass.

mkdocs-static-i18n compares every default-language search entry with every entry of the other
languages (quadratic: ~50 s of every publish at a thousand runs); the scaffold's hooks replace that
method with ``_dedupe_search``. Both run here on the same entries, the plugin's own method taken from
the class that defines it (the hooks patch only the plugin's class).
"""

from __future__ import annotations

import copy
import importlib.util
import random
from pathlib import Path

from mkdocs_static_i18n.reconfigure import ExtendedPlugin
from mkdocs_static_i18n.plugin import I18n

HOOKS = Path(__file__).resolve().parent.parent / "report" / "scaffold" / "mkdocs_hooks.py"


def _hooks():
    spec = importlib.util.spec_from_file_location("cardproof_site_hooks", HOOKS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Plugin:
    build_languages = ["en", "de"]


def _entries(seed: int, pages: int = 300) -> list[dict]:
    """A built site's shape: the English entries first, then the German ones; some German pages are
    the English page again (a fallback), some translated, some sections the same in both languages."""
    rnd = random.Random(seed)
    en, de = [], []
    for n in range(pages):
        folder = rnd.choice(["", "runs/", "compare/", "trends/"])
        page = f"{folder}page-{n}.html"
        sections = [("", f"Page {n}")] + [(f"#s{k}", f"Section {k}") for k in range(rnd.randint(0, 4))]
        kind = rnd.choice(["fallback", "translated", "mixed"])
        for anchor, title in sections:
            text = f"text {n} {anchor} {rnd.randint(0, 3)}"
            en.append({"location": page + anchor, "title": title, "text": text})
            if kind == "fallback" or (kind == "mixed" and rnd.random() < 0.5):
                de.append({"location": "de/" + page + anchor, "title": title, "text": text})
            else:
                de.append({"location": "de/" + page + anchor, "title": title + " (de)", "text": "Text " + text})
    # the same title and text on two pages: only the page with the same location is a copy
    en.append({"location": "runs/index.html", "title": "Runs", "text": "all runs"})
    de.append({"location": "de/index.html", "title": "Runs", "text": "all runs"})
    return en + de


def test_linear_dedupe_equals_the_plugins_own_on_many_sites():
    dedupe = _hooks()._dedupe_search
    for seed in range(20):
        entries = _entries(seed)
        theirs, ours = copy.deepcopy(entries), copy.deepcopy(entries)
        ExtendedPlugin.reconfigure_search_duplicates(_Plugin(), theirs)
        dedupe(_Plugin(), ours)
        assert ours == theirs, seed
        assert len(ours) < len(entries)  # fallback pages were there to drop
        assert {"location": "de/index.html", "title": "Runs", "text": "all runs"} in ours


def test_hooks_replace_the_plugins_method_when_the_config_is_read():
    hooks = _hooks()
    saved = I18n.__dict__.get("reconfigure_search_duplicates")
    try:
        hooks._linear_i18n_search()
        assert I18n.reconfigure_search_duplicates is hooks._dedupe_search
    finally:
        if saved is None:
            if "reconfigure_search_duplicates" in I18n.__dict__:
                del I18n.reconfigure_search_duplicates
        else:
            I18n.reconfigure_search_duplicates = saved
