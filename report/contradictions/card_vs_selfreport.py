"""The card shows less memory for a load than the runtime says it uses.

A gap where the card holds more than the self-report is expected and is
itemised in the memory section; the opposite cannot be explained by items
missing from the self-report, so both figures stay visible side by side.
"""

from __future__ import annotations

from .base import Contradiction, Side

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
            {"en": f"{r['model']}: the card shows less memory than the runtime reports",
             "de": f"{r['model']}: die Karte zeigt weniger Speicher, als der Server meldet"},
            Side({"en": f"Read from the card (NVML, the load's own processes): {card / 1024:.2f} GiB.",
                  "de": f"Von der Karte gelesen (NVML, die eigenen Prozesse des Ladevorgangs): {card / 1024:.2f} GiB."},
                 (f"memory-load-{r['load_id']}",)),
            Side({"en": f"The runtime's own figure: {report / 1024:.2f} GiB ({r.get('selfreport_source') or '?'}).",
                  "de": f"Die eigene Angabe des Servers: {report / 1024:.2f} GiB ({r.get('selfreport_source') or '?'})."},
                 (f"memory-load-{r['load_id']}",)),
        ))
    return out
