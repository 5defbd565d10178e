"""The card shows less memory for a load than the runtime says it uses.

A gap where the card holds more than the self-report is expected and is
itemised in the memory section; the opposite cannot be explained by items
missing from the self-report, so both figures stay visible side by side.
"""

from __future__ import annotations

from cardproof.marks import N_

from .base import Contradiction, Detector, Side, said

# NVML rounds to MiB and samples once a second; below this, no disagreement.
_TOLERANCE_MIB = 64.0


def detect(db, view: dict) -> list[Contradiction]:
    memory = view.get("memory") or {}
    out = []
    for r in memory.get("loads", []):
        card, report = r.get("card_mib"), r.get("selfreport_mib")
        if card is None or report is None or card >= report - _TOLERANCE_MIB:
            continue
        out.append(Contradiction(
            f"memory:{r['load_id']}",
            said(N_("{model}: the card shows less memory than the server reports"), {"model": r["model"]}),
            Side(said(N_("Read from the card (NVML, the load's own processes): {gib} GiB."), {"gib": (card / 1024, 2)}),
                 (f"memory-load-{r['load_id']}",)),
            Side(said(N_("The server's own figure: {gib} GiB ({source})."),
                      {"gib": (report / 1024, 2), "source": r.get("selfreport_source") or "?"}),
                 (f"memory-load-{r['load_id']}",)),
        ))
    return out


DETECTOR = Detector("card_vs_selfreport", detect)
