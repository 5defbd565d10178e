"""The fixed text every quality measurement reads: shipped with cardproof, never downloaded.

KL divergence is measured over a text, and figures from two texts are not
comparable: so there is one, in the package, with its SHA-256 stated here
and checked before every use (an edited or truncated file would measure
another text under the same name). It is Lewis Carroll's *Alice's
Adventures in Wonderland* (1865), in the public domain, as plain ASCII
(144,342 bytes, the twelve chapters without any edition's front or back
matter): literary English of 39,024 tokens for SmolLM2's 49k-vocabulary
tokenizer, enough for 8 chunks of 4,096 tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ShippedText:
    name: str
    file: str  # beside this module
    sha256: str
    size_bytes: int
    source: str


ALICE = ShippedText(
    name="alice-in-wonderland",
    file="alice.txt",
    sha256="70f0b8fb6039ea9255ce17f134272677239fa5e0f5b1c3636f437f723919b3af",
    size_bytes=144_342,
    source="Lewis Carroll, Alice's Adventures in Wonderland (1865), public domain",
)


class TextDamaged(Exception):
    """The shipped text is missing or is not the text its SHA-256 names."""


def path(text: ShippedText = ALICE) -> Path:
    """The shipped file, its SHA-256 checked; :class:`TextDamaged` where it is missing or differs."""
    p = Path(__file__).with_name(text.file)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TextDamaged(f"{p}: cannot read the shipped text ({exc.strerror})") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != text.sha256:
        raise TextDamaged(f"{p}: SHA-256 {digest}, expected {text.sha256} (the shipped text was changed)")
    return p


def max_tokens(text: ShippedText = ALICE) -> int:
    """An upper bound on the tokens any tokenizer makes of the text: one per byte, a BOS and a leading space.

    Byte-fallback tokenizers never make more tokens than bytes, so a context
    and chunk count above this bound is refused when the campaign is read.
    """
    return text.size_bytes + 2
