"""Pre-registered pass rules: a small safe expression language, checked at campaign time,
evaluated over a run's facts, medians and probe verdicts (never with ``eval``).

In short, ``rules/``: the pass-rule language (tokenizer, parser, type check,
evaluator — never ``eval``) and rule outcomes
"""

from __future__ import annotations

from cardproof.daemon.campaign.rules.lang import MISSING, RuleError, arms, evaluate, names, parse, tokenize
from cardproof.daemon.campaign.rules.schema import validate as validate_rule

__all__ = ["MISSING", "RuleError", "arms", "evaluate", "names", "parse", "tokenize", "validate_rule"]
