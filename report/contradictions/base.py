"""A contradiction: two sides, each with its evidence, open until resolved."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Side:
    text: dict  # language -> sentence
    evidence: tuple = ()  # anchors: "sample-12", "cell-3", "line-40"


@dataclass(frozen=True)
class Contradiction:
    key: str
    title: dict  # language -> title
    a: Side
    b: Side
    status: str = "open"  # open | resolved
    resolution: dict = field(default_factory=dict)
    source: str = "detected"  # detected | authored
