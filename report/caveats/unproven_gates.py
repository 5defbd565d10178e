"""Gates that never fired and whose canary did not run prove nothing."""

from __future__ import annotations

from .base import Caveat


def check(view: dict) -> list[Caveat]:
    unproven = [g["gate"] for g in view.get("gates", []) if g["unproven"]]
    if not unproven:
        return []
    return [
        Caveat(
            "unproven_gates",
            "note",
            "Unproven gates",
            "These gates never fired in this run and no canary showed that they can: {gates}. Their silence "
            "is not evidence that nothing went wrong.",
            {"gates": ", ".join(unproven)},
        )
    ]
