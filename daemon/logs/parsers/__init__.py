"""Log-line fact parsers: one registry, each parser a small pure function.

A parser takes the clean text of one line (colours and ``[port]`` prefix
removed, llama.cpp timestamp kept) and returns a list of :class:`Fact`.
Log formats change between server versions, so a fact may have several
parsers, one per format seen in the wild; each is tested with real lines.

A parser runs only on lines that contain one of its trigger strings: a
cheap substring test keeps the cost per line low (most lines carry no fact).
"""

from __future__ import annotations

import math

import re
from typing import Callable, NamedTuple


from cardproof.registry import declared

from .base import Fact, LineParsers, Parser, mib

#: module name -> its parsers, in ``LineParsers.order`` then name: the order of modules is the order of facts
PARSERS: dict[str, LineParsers] = declared(__name__, __path__, {"base"}, "PARSER", LineParsers)
#: (trigger substring, parser) in that order
REGISTRY: list[tuple[str, Parser]] = [(t, fn) for module in PARSERS.values()
                                      for triggers, fn in module.parsers for t in triggers]


#: substrings of lines that no parser reads but other code does (``LineParsers.markers``)
MARKERS: frozenset[str] = frozenset(m for module in PARSERS.values() for m in module.markers)


_compiled: dict = {}


def _dispatch():
    """One alternation of all triggers, and trigger -> parsers."""
    if not _compiled:
        by_trigger: dict[str, list[Parser]] = {}
        for t, fn in REGISTRY:
            by_trigger.setdefault(t, [])
            if fn not in by_trigger[t]:
                by_trigger[t].append(fn)
        for t in MARKERS:
            by_trigger.setdefault(t, [])
        _compiled["re"] = re.compile(_trie_pattern(by_trigger))
        _compiled["map"] = by_trigger
    return _compiled["re"], _compiled["map"]


def _trie_pattern(words) -> str:
    """One regular expression matching any of ``words``, factored by common prefix.

    A flat alternation makes the regex engine try every trigger at every
    position of every line; the factored form tries one branch per
    character (about 30 % less time per line here). The longer of two
    triggers where one starts the other is preferred, as in a flat
    alternation sorted longest first.
    """
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


def trigger_search():
    """The compiled ``search`` of all triggers and markers: an importer calls it before :func:`parse_line`."""
    return _dispatch()[0].search


def parse_line(text: str) -> list[Fact]:
    """All facts in one clean line; ``[]`` for the many lines without one."""
    trigger_re, by_trigger = _dispatch()
    found = trigger_re.findall(text)
    if not found:
        return []
    facts: list[Fact] = []
    seen: set = set()
    for t in found:
        for fn in by_trigger[t]:
            if fn in seen:
                continue
            seen.add(fn)
            try:
                facts.extend(fn(text))
            except (ValueError, OverflowError):  # a number no int or float holds: that parser's facts are skipped
                continue
    # a number past what a float holds (a garbled line's 400 digits) reads as infinity: no fact, never a
    # figure that later arithmetic (int(), sums, JSON) fails on; the line itself is kept as it was
    return [f for f in facts if f.value_num is None or math.isfinite(f.value_num)]


__all__ = ["Fact", "LineParsers", "MARKERS", "PARSERS", "Parser", "REGISTRY", "mib", "parse_line", "trigger_search"]
