"""A model the pin guard kept off the cards has no numbers, and the reader must be told why."""

from __future__ import annotations

from .base import Caveat


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
                "Not measured: the load was refused",
                "{model} was never loaded, so no request was sent for it: {reason}. Its rows are empty by "
                "design, to keep the pinned model on the cards.",
                {"model": c["model"], "reason": refused[0]["error_text"] or ""},
                cells,
            )
        )
    return out
