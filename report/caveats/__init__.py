"""Caveat rules, registered in one place. Each rule: ``check(view) -> [Caveat]``."""

from __future__ import annotations

from . import exception_rate, load_refused, prompt_tokens, reasoning_switch, speculative, unproven_gates, unstable
from .base import Caveat

RULES = {
    "unstable": unstable.check,
    "prompt_tokens": prompt_tokens.check,
    "speculative": speculative.check,
    "reasoning_switch": reasoning_switch.check,
    "unproven_gates": unproven_gates.check,
    "exception_rate": exception_rate.check,
    "load_refused": load_refused.check,
}


def caveats_for(view: dict) -> list[Caveat]:
    """All caveats the data of one run forces, in registry order."""
    out: list[Caveat] = []
    for check in RULES.values():
        out.extend(check(view))
    return out


__all__ = ["Caveat", "RULES", "caveats_for"]
