"""Read-only queries for the run article's memory section.

``memory_view(db, run_id)`` is all the template ``sections/memory.md.j2``
needs (variable name ``memory``). Card figures come from NVML rows only; a
self-report is shown beside them and never stands in for them. Without a
driver the view says "not measured (no NVIDIA driver)".
"""

from __future__ import annotations

import json

from cardproof.daemon.memory.attribution import load_window, not_measured_reason
from cardproof.daemon.memory.budget import budget, free_check_for_load
from cardproof.daemon.memory.readings import NOT_MEASURED
from cardproof.daemon.memory.reconcile import reconcile_load

from .queries import is_measured_load


def _status(db, run_id: int) -> tuple[str, str | None, str | None]:
    reason = not_measured_reason(db, run_id)
    if reason:
        return "not_measured", reason, None
    row = db.execute(
        "select source from memory_samples where run_id = ? and used_mib is not null limit 1", [run_id]
    ).fetchone()
    if row:
        return "measured", None, row[0]
    return "not_captured", None, None


def _devices(db, run_id: int) -> list[dict]:
    """The cards as the sampler saw them (name, total, PCIe link: lowest current, max)."""
    return list(db.query(
        """select device_index as "index", max(device_name) as name, max(total_mib) as total_mib,
                  min(pcie_gen_current) as pcie_gen_current, max(pcie_gen_max) as pcie_gen_max,
                  min(pcie_width_current) as pcie_width_current, max(pcie_width_max) as pcie_width_max
           from memory_samples where run_id = ? and scope = 'device' and total_mib is not null
           group by device_index order by device_index""",
        [run_id],
    ))


def _cells(db, load_id: int) -> list[dict]:
    return list(db.query(
        """select s.cell_id, c.prompt_class, c.reasoning, s.peak_mib, s.median_mib, s.n_ticks, s.status, s.note
           from memory_load_stats s left join cells c on c.id = s.cell_id
           where s.load_id = ? and s.kind = 'cell' order by s.id""",
        [load_id],
    ))


# English labels (the catalogue has the German) for stored codes
KIND_LABEL = {
    "exit": "memory breakdown printed at exit",
    "projection": "memory breakdown projected while fitting",
    "facts": "sum of the buffer lines",
    "ps": "size_vram",
    "plan": "memory plan in the log",
}
CATEGORY_LABEL = {
    "weights": "weights", "kv": "KV cache", "compute": "compute buffer", "output": "output buffer",
    "draft": "draft/MTP context", "projector": "projector",
}


def _load_row(db, run_id: int, load: dict) -> dict:
    rec = reconcile_load(db, load["id"])
    card = rec["card"]
    ts_from, ts_to, _ = load_window(db, load["id"])
    sr = rec["selfreport"]
    by_cat = rec["by_category"]
    return {
        "load_id": load["id"],
        "model": load["model"],
        "pinned": bool(load["pinned"]),
        "card_mib": card["card_mib"],
        "card_basis": card["basis"],
        "card_status": card["status"],
        "card_note": card["note"],
        "peak_mib": card["peak_mib"],
        "per_device": card["per_device"],
        "pids": card["pids"],
        "selfreport_mib": sr["gpu_mib"] if sr else None,
        "selfreport_total_mib": sr["total_mib"] if sr else None,
        "selfreport_source": sr["source"] if sr else None,
        "selfreport_kind": KIND_LABEL.get(sr["kind"], sr["kind"]) if sr else None,
        "covers": (sr or {}).get("items", {}).get("covers", []),
        "gpu_share": (sr or {}).get("items", {}).get("gpu_share"),
        "gap_mib": rec["gap_mib"],
        "weights_mib": by_cat.get("weights"),
        "kv_mib": by_cat.get("kv"),
        "output_mib": by_cat.get("output"),
        "compute_by_device": rec["compute_by_device"],
        "draft_mib": by_cat.get("draft"),
        "projector_mib": by_cat.get("projector"),
        "gap_items": [{**i, "label": CATEGORY_LABEL[i["category"]]} for i in rec["gap_items"]],
        "explained_mib": rec["explained_mib"],
        "unexplained_mib": rec["unexplained_mib"],
        "rest_mib": rec["rest_mib"],
        "estimated": rec["estimated"],
        "notes": rec["notes"],
        "budget": budget(db, run_id, card["card_mib"], ts_from, ts_to),
        "free_before": free_check_for_load(db, load["id"]),
        "cells": _cells(db, load["id"]),
        "neighbours": card["neighbours"],
        "plan": _plan(db, load["id"]),
    }


def _plan(db, load_id: int) -> dict | None:
    """The runtime's own plan for the load (Ollama's scheduler lines), shown beside the card, never for it."""
    row = db.execute("select gpu_mib, total_mib, items_json, line_ids_json from memory_selfreports "
                     "where load_id = ? and kind = 'plan' order by id desc limit 1", [load_id]).fetchone()
    if row is None:
        return None
    items = json.loads(row[2] or "{}").get("by_item", {})
    return {
        "gpu_mib": row[0], "total_mib": row[1],
        "items": [{"label": CATEGORY_LABEL[cat], "device": dev, "mib": mib}
                  for cat in ("weights", "kv", "compute") for dev, mib in sorted(items.get(cat, {}).items())],
        "line_ids": json.loads(row[3] or "[]"),
    }


def memory_view(db, run_id: int) -> dict:
    """Everything the memory section shows for one run, computed from rows alone."""
    status, reason, source = _status(db, run_id)
    loads = list(db.query(
        """select loads.id, models.name as model, loads.trigger, loads.origin, samples.kind as sample_kind,
                  loads.sample_id,
                  coalesce((select max(pinned) from cells where cells.run_id = loads.run_id
                            and cells.model_id = loads.model_id), 0) as pinned
           from loads join models on models.id = loads.model_id
           left join samples on samples.id = loads.sample_id
           where loads.run_id = ? and coalesce(loads.status, 'loaded') not in ('failed', 'refused')
             and loads.merged_into is null and coalesce(loads.trigger, '') != 'quality'
           order by loads.id""",
        [run_id],
    ))
    # a canary's or a probe's reload is no measured load: its memory stays on the evidence page
    left_out = [ld["id"] for ld in loads if not is_measured_load(ld)]
    rows = [_load_row(db, run_id, ld) for ld in loads if is_measured_load(ld)]
    compute_devices = sorted({d for r in rows for d in r["compute_by_device"]})
    foreign = db.execute(
        """select count(distinct pid) from memory_samples where run_id = ? and scope = 'process'
           and pid_status in ('foreign', 'mismatch')""",
        [run_id],
    ).fetchone()[0]
    return {
        "status": status,
        "message": NOT_MEASURED,
        "reason": reason,
        "source": source,
        "devices": _devices(db, run_id),
        "loads": rows,
        "left_out_loads": left_out,
        "compute_devices": compute_devices,
        "any_selfreport": any(r["selfreport_mib"] is not None for r in rows),
        "any_plan": any(r["plan"] for r in rows),
        "foreign_pids": foreign,
        "labels": CATEGORY_LABEL,
    }


def memory_json(db, run_id: int) -> str:
    """The view as JSON (for debugging and for other renderers)."""
    return json.dumps(memory_view(db, run_id), default=str, indent=1)
