"""A finding: what the numbers of a run mean, with the figures it rests on, why it may be said, and its limit.

A caveat says what the reader must not conclude; a finding says what they
may. Because a finding is what a reader remembers, each one carries the
condition that allowed it and the caveat that limits it, and its figures
link to the rows they come from. A rule returns message ids and values, never
text: the article says them in each language with the locale's numbers, and
``cardproof publish`` records them so a later change gets an addendum. A
rule's module carries everything about it: the check, its place in the
article and its messages in both languages (``german``, merged into the
report's catalogue by ``report/i18n.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


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
    """A message id with its values: one figure line, the condition or the caveat of a finding."""

    text: str
    params: dict = field(default_factory=dict)


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


@dataclass(frozen=True)
class FindingRule:
    """One finding rule, declared as ``RULE = FindingRule(...)`` in its own module of ``report/findings/``."""

    name: str
    check: Callable[[dict], list[Finding]]  # view of one finished run -> the findings its data supports
    order: int  # place of its findings in the article
    # every message the check emits (English message id) -> German
    german: dict

    def __call__(self, view: dict) -> list[Finding]:
        return self.check(view)


#: the section's words and the figures' units (the rules' own sentences are in their modules)
SECTION = "Findings"
INTRO = ("What the numbers of this run mean, as far as they carry it. Each finding names the figures it rests on "
         "(linked to their evidence), why it may be stated here and what limits it; none comes from an unstable "
         "cell or from a difference the samples do not show beyond their scatter.")
WHY = "Why it is stated:"
LIMIT = "What limits it:"
BILLION = "{n} B"
MILLION = "{n} M"

SECTION_GERMAN = {
    SECTION: "Befunde",
    INTRO: ("Was die Zahlen dieses Laufs bedeuten, soweit sie es tragen. Jeder Befund nennt die Zahlen, auf denen er "
            "beruht (verlinkt mit ihren Belegen), warum er hier gesagt werden darf und was ihn einschränkt; keiner "
            "stammt aus einer instabilen Zelle oder aus einem Unterschied, den die Messungen nicht über ihre Streuung "
            "hinaus zeigen."),
    WHY: "Warum er gesagt wird:",
    LIMIT: "Was ihn einschränkt:",
    BILLION: "{n} Mrd.",
    MILLION: "{n} Mio.",
}
