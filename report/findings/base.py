"""A finding: what the numbers of a run mean, with the figures it rests on, why it may be said, and its limit.

A caveat says what the reader must not conclude; a finding says what they
may. Because a finding is what a reader remembers, each one carries the
condition that allowed it and the caveat that limits it, and its figures
link to the rows they come from. A rule returns message ids and values, never
text: the article says them in each language with the locale's numbers, and
``cardproof publish`` records them so a later change gets an addendum. A
rule's module carries the check and its place in the article; its message
ids are marked ``N_()`` there and have their German in the report's
catalogue (report/locale/de/LC_MESSAGES/cardproof.po).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from cardproof.marks import N_


@dataclass(frozen=True)
class Fig:
    """One figure: a value formatted for the page's locale, linked to the row it comes from.

    ``kind``: ``num`` (``digits`` decimals), ``ratio`` (×1.23), ``signed_pct`` (+8.8 %), ``mib`` (MiB
    or GiB), ``params`` (135 M / 30.5 B), ``seconds``. ``link``: an anchor of the article or its
    evidence page (``cell-12``, ``step-3``, ``sample-9``, ``line-7``, ``fig-load-4``, ``fit-2``).
    """

    value: float | int | None
    kind: str = "num"
    digits: int = 1
    link: str | None = None


@dataclass(frozen=True)
class Term:
    """A word of the catalogue inside a value (a prompt class, "dense"): said in the page's language."""

    msgid: str


@dataclass(frozen=True)
class Quote:
    """A server's or a log's own words: evidence, shown quoted and never translated."""

    text: str


@dataclass(frozen=True)
class Line:
    """A message id with its values: one figure line, the condition or the caveat of a finding.

    ``text`` is an ``NP_`` pair where a count meets a noun: ``count`` names the param whose value
    chooses the form in the page's language."""

    text: str | tuple[str, str]
    params: dict = field(default_factory=dict)
    count: str | None = None


@dataclass(frozen=True)
class Finding:
    """One finding of a run. ``params`` values: ``Fig``, ``Term``, ``Quote``, text from data (a model's
    name: escaped when shown), or a list of those (joined with commas)."""

    rule: str
    key: str  # what it is about, the same in every build: a publication's figure is matched on it
    title: str  # message id
    text: str  # message id of the statement, with {placeholders}
    params: dict
    figures: tuple[Line, ...]  # the figures it rests on, each linked to its evidence
    condition: Line  # why it may be stated here
    caveat: Line  # what limits it
    count: str | None = None  # where ``text`` is an NP_ pair: the param whose value chooses its form


@dataclass(frozen=True)
class FindingRule:
    """One finding rule, declared as ``RULE = FindingRule(...)`` in its own module of ``report/findings/``."""

    name: str
    check: Callable[[dict], list[Finding]]  # view of one finished run -> the findings its data supports
    order: int  # place of its findings in the article

    def __call__(self, view: dict) -> list[Finding]:
        return self.check(view)


#: the section's words and the figures' units (the rules' own sentences are in their modules)
SECTION = N_("Findings")
INTRO = N_("What the numbers of this run mean, as far as they carry it. Each finding names the figures it rests on "
           "(linked to their evidence), why it may be stated here and what limits it; none comes from an unstable "
           "cell or from a difference the samples do not show beyond their scatter.")
WHY = N_("Why it is stated:")
LIMIT = N_("What limits it:")
BILLION = N_("{n} B")
MILLION = N_("{n} M")
