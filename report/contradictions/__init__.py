"""Contradictions: where two measurements disagree, both sides stay visible.

Detectors (one module each, declaring ``DETECTOR = Detector(name, detect)`` with
``detect(db, view)`` and its text in both languages; every module here but ``base`` and
``authored`` is one) find
disagreements in the data; authors add their own in ``notes/run-<id>.contradictions.toml``.
Nothing here resolves a contradiction: only an author's resolution does.
"""

from __future__ import annotations

from cardproof.registry import declared

from . import authored
from .base import Contradiction, Detector, Side

#: modules of this package that detect nothing
_NOT_DETECTORS = {"authored", "base"}

#: name -> detect, in ``Detector.order`` then name (the order they appear in the article)
DETECTORS = {name: d.detect for name, d in declared(__name__, __path__, _NOT_DETECTORS, "DETECTOR", Detector).items()}


def contradictions_for(db, view: dict, project=None) -> list[Contradiction]:
    """Detected plus authored contradictions of one run."""
    out: list[Contradiction] = []
    for detect in DETECTORS.values():
        out.extend(detect(db, view))
    if project is not None:
        out.extend(authored.load(project, view["run"]["id"]))
    return out


__all__ = ["Contradiction", "Side", "DETECTORS", "contradictions_for"]
