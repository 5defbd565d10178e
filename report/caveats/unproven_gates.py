"""Gates that never fired and whose canary did not run prove nothing."""

from __future__ import annotations

from .base import Caveat, CaveatRule

TITLE = 'Unproven gates'
TEXT = ('These gates never fired in this run and no canary showed that they can: {gates}. Their '
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


RULE = CaveatRule('unproven_gates', check, order=50, german={
    TITLE: 'Unbewiesene Gates',
    TEXT: ('Diese Gates haben in diesem Lauf nie ausgelöst, und keine Kanarienprobe hat gezeigt, '
           'dass sie es können: {gates}. Ihr Schweigen ist kein Beleg dafür, dass nichts '
           'schiefging.'),
})
