"""A model the pin guard kept off the cards has no numbers, and the reader must be told why."""

from __future__ import annotations

from cardproof.marks import N_
from .base import Caveat, CaveatRule

TITLE = N_('Not measured: the load was refused')
TEXT = N_('{model} was never loaded, so no request was sent for it: {reason}. Its rows are empty by '
          'design, to keep the pinned model on the cards.')


def check(view: dict) -> list[Caveat]:
    out = []
    seen = set()
    for c in view["cells"]:
        refused = [s for s in c["errors"] if s["error_kind"] == "refused"]
        if not refused or c["model"] in seen:
            continue
        seen.add(c["model"])
        cells = tuple(x["id"] for x in view["cells"] if x["model"] == c["model"])
        out.append(
            Caveat(
                "load_refused",
                "warning",
                TITLE,
                TEXT,
                {"model": c["model"], "reason": refused[0]["error_text"] or ""},
                cells,
            )
        )
    return out


RULE = CaveatRule('load_refused', check, order=70)
