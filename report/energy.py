"""Read-only queries for the run article's Energy section (``sections/energy.md.j2``, variable ``energy``).

Every figure comes from the machine's own counters as the run stored them (``daemon/energy``): the
idle draw before the first cell, and per cell and source its joules, mean draw and joules per
generated and per prompt token. Where no counter could be read, the section says so with each
source's reason; nothing is estimated from a power rating or a self-report.
"""

from __future__ import annotations

from cardproof.daemon.campaign.evidence import cell_energy, idle_draw, unavailable
from cardproof.marks import N_

#: a source as the page names it (catalogue message ids); a recorded one keeps its word
SOURCE_LABEL = {"nvml": N_("card (NVML)"), "amdsmi": N_("AMD GPU (amdsmi)"), "rapl": N_("CPU packages (RAPL)")}


def label(source: str) -> str:
    """The page's words for a stored source (``recorded nvml`` -> the NVML label, marked recorded by the page)."""
    return SOURCE_LABEL.get(source.removeprefix("recorded ").strip(), source)


def energy_view(db, run_id: int) -> dict:
    """Status, reasons, idle draw and per-cell figures of one run's energy, from its stored readings."""
    try:
        reasons = unavailable(db, run_id)
        idle = idle_draw(db, run_id)
        cells = list(db.execute(
            """select c.id, m.name, c.prompt_class, c.reasoning from cells c join models m on m.id = c.model_id
               where c.run_id = ? and coalesce(c.kind, 'measure') = 'measure'
               and c.id in (select cell_id from energy_readings where run_id = ? and phase = 'cell_end')
               order by c.position, c.id""", [run_id, run_id]))
    except Exception as exc:  # noqa: BLE001 -- a store from before the energy table: nothing to say
        if "no such table" in str(exc):
            return {"status": "not_captured"}
        raise
    rows = []
    for cell_id, model, cls, reasoning in cells:
        for source, e in cell_energy(db, cell_id).items():
            rows.append({"cell_id": cell_id, "model": model, "prompt_class": cls, "reasoning": bool(reasoning),
                         "source": source, "label": label(source), **{k: e.get(k) for k in (
                             "joules", "seconds", "watts", "j_per_generated_token", "j_per_prompt_token",
                             "generated_tokens", "prompt_tokens")}})
    sources = {r["source"] for r in rows} | set(idle)
    status = "measured" if sources else ("not_measured" if reasons else "not_captured")
    return {
        "status": status,
        "reasons": [{"source": k, "label": label(k), "reason": v} for k, v in reasons.items()],
        "idle": [{"source": k, "label": label(k), "watts": v["watts"]} for k, v in sorted(idle.items())],
        "cells": rows,
        "recorded": any(s.startswith("recorded") for s in sources),
    }
