"""What a run may state: the rules that keep it honest (``stable``) and the findings made under them.

``stable`` holds what every statement of the report obeys: unstable cells,
measurable differences, the headline. Every other module here but ``base``,
``inputs``, ``pick`` and ``show`` defines ``RULE``, a :class:`~.base.FindingRule` (its
``check(view) -> [Finding]``, its order); ``RULES`` lists them by
``order``. Adding a finding is adding its module and its test (a run where it
must fire and one where it must stay silent).
"""

from __future__ import annotations

from cardproof.registry import declared

from .stable import (BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, cell_values, cells_measurable,
                     every_sample_order, headline, interval_too_wide, is_unstable, judge_cell, measurable,
                     median_interval, reasoning_pairs, reasoning_took, report_limits, spread_ratio, unstable_ratio,
                     welch_differs)
from .base import Fig, Finding, FindingRule, Line, Quote, Term

#: modules of this package that are no rule
HELPERS = {"base", "stable", "inputs", "show", "pick"}

#: rule name -> rule (callable as its check), in article order
RULES: dict[str, FindingRule] = declared(__name__, __path__, HELPERS, "RULE", FindingRule)


def findings_for(view: dict) -> list[Finding]:
    """Every finding the run's data supports, in article order; none from a run that did not finish.

    ``view``: the run view with what ``inputs.gather`` adds. A rule that cannot judge a view (an older
    or damaged store lacks what it reads) states nothing rather than stopping the article.
    """
    if view["run"].get("status") != "completed":
        return []
    out: list[Finding] = []
    for rule in RULES.values():
        try:
            out.extend(rule(view))
        except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
            import sys

            print(f"run {view['run'].get('id')}: finding rule {rule.name} skipped: {exc!r}", file=sys.stderr)
    return out


__all__ = ["BOOTSTRAP_LEVEL", "BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "Fig", "Finding", "FindingRule", "Line",
           "Quote", "RULES", "Term", "cell_values", "cells_measurable", "every_sample_order", "findings_for",
           "headline", "interval_too_wide", "is_unstable", "judge_cell", "measurable", "median_interval",
           "reasoning_pairs", "reasoning_took", "report_limits", "spread_ratio", "unstable_ratio", "welch_differs"]
