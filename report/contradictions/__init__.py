"""Contradictions: where two measurements disagree, both sides stay visible.

Detectors (one module each, declaring ``DETECTOR = Detector(name, detect)`` with
``detect(db, view)`` and its text in both languages; every module here but ``base`` and
``authored`` is one) find
disagreements in the data; authors add their own in ``notes/run-<id>.contradictions.toml``.
Nothing here resolves a contradiction: only an author's resolution does.

In short, ``caveats/``, ``contradictions/``: one module per caveat rule and per
contradiction detector. ``contradictions/repeated_figures.py`` compares the one-stream decode rate a
run measured in separate blocks under the same conditions (model, prompt class, reasoning): the main
cells' valid samples, the ``[load]`` step at one stream, the ``[depth]`` step at depth 0 and the
probes' requests whose answers carry the server's ``timings`` (a step's or probe's prompt joins the
class whose measured prompt size is nearest, within a factor of four); two blocks disagree where
their ranges are apart and ranges of one source come apart so at most one time in twenty
(``findings.stable.measurable`` on the spreads: 2 / C(na + nb, na); a test of the ranges themselves,
which a widely scattered block does not defeat as it defeats Welch's t-test), and each side names
its block, range, median, n, when it ran, and links the block and its lowest and highest figure. Its
text is message ids of the catalogue said through ``Lang``
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
