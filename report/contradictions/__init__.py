"""Contradictions: where two measurements disagree, both sides stay visible.

Detectors (one small function each, registered here) find disagreements in
the data; authors add their own in ``notes/run-<id>.contradictions.toml``.
Nothing here resolves a contradiction: only an author's resolution does.
"""

from __future__ import annotations

from . import authored, card_vs_selfreport, counters_vs_clock, spec_facts_vs_samples, thinking_probe_vs_samples
from .base import Contradiction, Side

DETECTORS = {
    "card_vs_selfreport": card_vs_selfreport.detect,
    "counters_vs_clock": counters_vs_clock.detect,
    "spec_facts_vs_samples": spec_facts_vs_samples.detect,
    "thinking_probe_vs_samples": thinking_probe_vs_samples.detect,
}


def contradictions_for(db, view: dict, project=None) -> list[Contradiction]:
    """Detected plus authored contradictions of one run."""
    out: list[Contradiction] = []
    for detect in DETECTORS.values():
        out.extend(detect(db, view))
    if project is not None:
        out.extend(authored.load(project, view["run"]["id"]))
    return out


__all__ = ["Contradiction", "Side", "DETECTORS", "contradictions_for"]
