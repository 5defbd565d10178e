"""Caveat rules, built from the modules of this package: one module, one rule.

Every module here other than ``base`` defines ``RULE``, a
:class:`~.base.CaveatRule` (its ``check(view) -> [Caveat]``, its order); ``RULES`` lists them by ``order``. Adding a rule is adding its
module and its test.
"""

from __future__ import annotations

from cardproof.registry import declared

from .base import Caveat, CaveatRule

#: rule name -> rule (callable as its check), in article order
RULES: dict[str, CaveatRule] = declared(__name__, __path__, {"base"}, "RULE", CaveatRule)


def caveats_for(view: dict) -> list[Caveat]:
    """All caveats the data of one run forces, in registry order."""
    out: list[Caveat] = []
    for rule in RULES.values():
        out.extend(rule(view))
    return out


__all__ = ["Caveat", "CaveatRule", "RULES", "caveats_for"]
