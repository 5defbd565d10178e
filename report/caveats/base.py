"""A caveat: a sentence the data forces on the reader, with its parameters; a rule: what forces it.

Rules return the English message id and the values; the template renders
the text in each language, with numbers formatted for that locale. A rule's
module carries the check and its place in the article; its titles and texts
are marked ``N_()`` (``NP_()`` for a count's two forms) and have their German
in the report's catalogue (report/locale/de/LC_MESSAGES/cardproof.po).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Caveat:
    rule: str
    kind: str  # admonition type: warning | note | info
    title: str  # message id
    text: str | tuple[str, str]  # message id with {placeholders}; (singular, plural) for a count
    params: dict = field(default_factory=dict)  # values; floats are locale-formatted when rendered
    cells: tuple = ()  # cell ids the caveat is about (links to the evidence)
    count: str = "n"  # the param whose number picks the form of a (singular, plural) text


@dataclass(frozen=True)
class CaveatRule:
    """One caveat rule, declared as ``RULE = CaveatRule(...)`` in its own module of ``report/caveats/``."""

    name: str
    check: Callable[[dict], list[Caveat]]  # view of one run -> the caveats its data forces
    order: int  # place of its boxes in the article

    def __call__(self, view: dict) -> list[Caveat]:
        return self.check(view)
