"""Speculative decoding was active on some rows, so those rows measure differently."""

from __future__ import annotations

from cardproof.marks import N_
from .base import Caveat, CaveatRule

TITLE = N_('Speculative decoding on some rows')
TEXT = N_('{model} ran with speculative decoding ({acc} of {gen} draft tokens accepted, {rate}); the '
          'other rows did not. Its decode rate depends on how well the draft model guesses and is not '
          "the model's plain speed.")


def check(view: dict) -> list[Caveat]:
    spec = {}
    for c in view["cells"]:
        for s in c["samples"]:
            if s["draft_tokens"]:
                acc, gen = spec.get(c["model"], (0, 0))
                spec[c["model"]] = (acc + (s["draft_accepted"] or 0), gen + s["draft_tokens"])
    if not spec or len(spec) == len(view["models"]):
        return []
    out = []
    for model, (acc, gen) in sorted(spec.items()):
        out.append(
            Caveat(
                "speculative",
                "warning",
                TITLE,
                TEXT,
                {"model": model, "acc": ("int", acc), "gen": ("int", gen), "rate": ("pct", acc / gen if gen else 0)},
            )
        )
    return out


RULE = CaveatRule('speculative', check, order=30)
