"""Degenerate output: a reply that repeats itself instead of answering.

A small model that loses its way often runs to the token limit repeating
itself: a dict literal that lists the same keys again and again (SmolLM2 asked
for ``roman_to_int``), the same line over and over, or one letter or syllable
run on ("DCMYMMUUUUUU..."). Such a reply is not an unfinished answer that a
larger budget would complete, and a probe says so with its own arm
(``looping``) instead of blaming the budget (``cut_at_max_tokens``).
"""

from __future__ import annotations

import re
from collections import Counter

# a string key of a dict literal ("M": 1000 / 'M': 1000)
_KEY = re.compile(r"""(["'])((?:(?!\1)[^\\\n])*)\1\s*:""")
# letters or digits: a unit of one to eight repeated twenty times and more in a row
_RUN = re.compile(r"([A-Za-z0-9]{1,8}?)\1{19,}")
#: the same line this many times in a row
SAME_LINE_IN_A_ROW = 3
#: a line of at least LONG_LINE characters this many times in the reply
LONG_LINE, LONG_LINE_TIMES = 12, 5


def _dict_regions(text: str) -> list[str]:
    """The text of every brace region, innermost regions separately; an unclosed one runs to the end."""
    regions, stack = [], []
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            regions.append(text[stack.pop() + 1:i])
    regions += [text[start + 1:] for start in stack]
    return regions


def _duplicate_key(text: str) -> str | None:
    for region in _dict_regions(text):
        # keys of nested regions belong to those regions: blank them out of this one
        flat = re.sub(r"\{[^{}]*\}", "", region)
        keys = Counter(m.group(2) for m in _KEY.finditer(flat))
        if keys:
            key, n = keys.most_common(1)[0]
            if n > 1:
                return f"the key {key!r} {n} times in one dict literal"
    return None


def _repeated_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    run, best = 1, (1, "")
    for prev, cur in zip(lines, lines[1:]):
        run = run + 1 if cur == prev else 1
        if run > best[0]:
            best = (run, cur)
    if best[0] >= SAME_LINE_IN_A_ROW:
        return f"the line {best[1][:80]!r} {best[0]} times in a row"
    counts = Counter(ln for ln in lines if len(ln) >= LONG_LINE)
    if counts:
        line, n = counts.most_common(1)[0]
        if n >= LONG_LINE_TIMES:
            return f"the line {line[:80]!r} {n} times"
    return None


def looping(text: str) -> str | None:
    """What repeats in ``text`` (for the evidence page), or None where nothing does."""
    text = text or ""
    m = _RUN.search(text)
    if m:
        return f"{m.group(1)!r} repeated {len(m.group(0)) // len(m.group(1))} times in a row"
    return _duplicate_key(text) or _repeated_line(text)
