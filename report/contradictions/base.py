"""A contradiction: two sides, each with its evidence, open until resolved."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Side:
    text: dict  # language -> sentence
    evidence: tuple = ()  # anchors: "sample-12", "cell-3", "line-40"


@dataclass(frozen=True)
class Contradiction:
    key: str
    title: dict  # language -> title
    a: Side
    b: Side
    status: str = "open"  # open | resolved
    resolution: dict = field(default_factory=dict)
    source: str = "detected"  # detected | authored


@dataclass(frozen=True)
class Detector:
    """What a detector module declares as ``DETECTOR``: its name and ``detect(db, view) -> [Contradiction]``.

    Detectors run (and their contradictions appear) in ``order``, then by name.
    """

    name: str
    detect: Callable[..., list]
    order: int = 0


def said(msgid: str | tuple[str, str], values: dict | None = None, count: int | None = None) -> dict[str, str]:
    """``{language: sentence}``: the catalogue's ``msgid`` in each language with ``values`` filled in.

    A number is formatted by the language's locale (an int with no decimals, a float with one, a
    ``(value, digits)`` pair with that many), a text is put in as it is (a model's name, a log's value).
    A ``(singular, plural)`` msgid takes the form for ``count``.
    """
    from ..i18n import LANGUAGES, Lang

    out = {}
    for code in LANGUAGES:
        L = Lang(code)
        if isinstance(msgid, tuple):
            text = L.translations.ngettext(msgid[0], msgid[1], count if count is not None else 0)
        else:
            text = L.gettext(msgid)
        out[code] = text.format(**{k: _shown(L, v) for k, v in (values or {}).items()})
    return out


def _shown(L, value) -> str:
    if isinstance(value, tuple):
        return L.num(value[0], value[1])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return L.num(value, 0 if isinstance(value, int) else 1)
