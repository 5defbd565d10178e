"""A caveat: a sentence the data forces on the reader, with its parameters.

Rules return the English message id and the values; the template renders
the text in each language, with numbers formatted for that locale.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Caveat:
    rule: str
    kind: str  # admonition type: warning | note | info
    title: str  # message id
    text: str  # message id with {placeholders}
    params: dict = field(default_factory=dict)  # values; floats are locale-formatted when rendered
    cells: tuple = ()  # cell ids the caveat is about (links to the evidence)
