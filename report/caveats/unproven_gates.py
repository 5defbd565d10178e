"""Gates that never fired and whose canary did not run prove nothing."""

from __future__ import annotations

from cardproof.marks import N_
from .base import Caveat, CaveatRule

TITLE = N_('Unproven gates')
TEXT = N_('These gates never fired in this run and no canary showed that they can: {gates}. Their '
          'silence is not evidence that nothing went wrong.')


def check(view: dict) -> list[Caveat]:
    unproven = [g["gate"] for g in view.get("gates", []) if g["unproven"]]
    if not unproven:
        return []
    return [
        Caveat(
            "unproven_gates",
            "note",
            TITLE,
            TEXT,
            {"gates": ", ".join(unproven)},
        )
    ]


RULE = CaveatRule('unproven_gates', check, order=50)
