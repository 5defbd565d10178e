"""Read-only queries for the run article's memory section.

``memory_view(db, run_id)`` is all the template ``sections/memory.md.j2``
needs (variable name ``memory``). Card figures come from NVML rows only; a
self-report is shown beside them and never stands in for them. Without a
driver the view says "not measured (no NVIDIA driver)". The server process's
own memory on the host (``daemon/memory/host.py``, psutil) is in every load's
``process`` on every machine, beside the self-report, each with its source.
"""

from __future__ import annotations

import json

from cardproof.daemon.campaign.evidence import load_window, not_measured_reason
from cardproof.daemon.campaign.evidence import budget, free_check_for_load
from cardproof.daemon.campaign.evidence import load_summary
from cardproof.daemon.campaign.evidence import NOT_MEASURED, is_card_device
from cardproof.daemon.campaign.evidence import MEMORY_FACTS as CATEGORY_FACTS, reconcile_load

from cardproof.marks import N_
from .queries import is_measured_load
from cardproof.daemon.store import json_value


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
    "exit": N_("memory breakdown printed at exit"),
    "projection": N_("memory breakdown projected while fitting"),
    "facts": N_("sum of the buffer lines"),
    "ps": "size_vram",
    "plan": N_("memory plan in the log"),
}
CATEGORY_LABEL = {
    "weights": "weights", "kv": "KV cache", "compute": N_("compute buffer"), "output": N_("output buffer"),
    "draft": N_("draft/MTP context"), "projector": "projector",
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
        "selfreport_host": _host_part(sr),
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
        "process": _process(db, load["id"]),
        "unified": _unified(db, load["id"]),
        "log_buffers": _buffers(db, load["id"]),
        "process_cells": _process_cells(db, load["id"]),
    }


def _host_part(sr: dict | None) -> dict | None:
    """The self-report's host rows where it names no card (a CPU host: llama-server's breakdown
    ``Host | 294 = 92 + 180 + 22``): its total and parts in MiB, the lines that printed them; for a sum of
    buffer lines none of which is a card's, that sum.

    On such a host the card figure is 0 by construction, which is no self-report at all; this is."""
    devices = ((sr or {}).get("items") or {}).get("devices") or {}
    if not devices:
        # the sum of the load's buffer lines: none on a card, so all of it is host memory (no parts printed)
        if sr and sr.get("kind") == "facts" and not sr.get("gpu_mib") and (sr.get("total_mib") or 0) > 0:
            return {"self_mib": sr["total_mib"], "model_mib": None, "context_mib": None, "compute_mib": None,
                    "devices": [], "line_ids": _line_ids(sr)}
        return None
    if any(is_card_device(name) for name in devices):
        return None
    parts = [d for d in devices.values() if isinstance(d.get("self"), (int, float))]
    if not parts:
        return None

    def total(key):
        values = [d.get(key) for d in parts]
        return sum(values) if all(isinstance(v, (int, float)) for v in values) else None

    return {"self_mib": total("self"), "model_mib": total("model"), "context_mib": total("context"),
            "compute_mib": total("compute"), "devices": sorted(devices), "line_ids": _line_ids(sr)}


def _line_ids(sr: dict) -> list:
    return [i for i in json_value(sr.get("line_ids_json"), list, []) if isinstance(i, int)]


def _process(db, load_id: int) -> dict:
    """The load's server process as the OS counts it, or why there is no figure (never a guessed one)."""
    summary = load_summary(db, load_id)
    none = dict.fromkeys(("n", "peak_rss_mib", "median_rss_mib", "peak_pss_mib", "peak_uss_mib", "hwm_mib",
                          "anon_mib", "file_mib", "shmem_mib", "swap_mib", "reason"))
    none["pids"] = []
    if summary:
        pids = [r[0] for r in db.execute("select distinct pid from host_memory_samples where load_id = ? "
                                         "order by pid", [load_id])]
        return {**summary, "pids": pids, "note": None}
    pids = [r[0] for r in db.execute("select distinct pid from memory_load_pids where load_id = ?", [load_id])]
    if not pids:
        return {**none, "note": N_("the load's server process was not identified on this host (no port, no PID)")}
    return {**none, "note": N_("the server process was gone before it was read"), "pids": pids}


def _buffers(db, load_id: int) -> dict:
    """The load's weights and KV cache on every device (card and host alike) and its context, as its log
    states them, each with the first line it rests on: what the memory finding sets against each other."""
    out: dict = {}
    for key, names in (("weights", ("model_buffer_mib",)), ("kv", ("kv_buffer_mib", "kv_swa_buffer_mib")),
                       ("ctx", ("ctx_size",))):
        marks = ",".join("?" * len(names))
        rows = db.execute(f"select value_num, line_id from facts where load_id = ? and name in ({marks}) "
                          "and value_num is not null order by id", [load_id, *names]).fetchall()
        if key == "ctx":
            out["ctx_size"] = rows[-1][0] if rows else None
            continue
        out[f"{key}_mib"] = round(sum(v for v, _ in rows), 3) if rows else None
        out[f"{key}_line"] = next((lid for _, lid in rows if lid is not None), None)
    return out


def _unified(db, load_id: int) -> dict | None:
    """Apple Metal's buffers of a load (``MTL0``, ``MTL0_Mapped``, older ``Metal``) as its log states them:
    unified memory, in the process's own memory, never a card. None for a load on no Metal device."""
    rows = db.execute(
        "select name, device, value_num, line_id from facts where load_id = ? and value_num is not null "
        "and (device like 'MTL%' or device like 'Metal%' or name = 'metal_working_set_mib') order by id",
        [load_id]).fetchall()
    buffers = [(v, lid) for name, dev, v, lid in rows if dev and name in CATEGORY_FACTS]
    working = [(v, lid) for name, _dev, v, lid in rows if name == "metal_working_set_mib"]
    if not buffers:
        return None
    return {"platform": "Apple Metal", "buffers_mib": round(sum(v for v, _ in buffers), 3),
            "line_ids": sorted({lid for _, lid in buffers if lid is not None}),
            "working_set_mib": working[-1][0] if working else None,
            "working_set_line": working[-1][1] if working else None}


def _process_cells(db, load_id: int) -> list[dict]:
    try:
        return list(db.query(
            """select h.cell_id, c.prompt_class, c.reasoning, h.peak_rss_mib, h.median_rss_mib, h.peak_pss_mib,
                      h.anon_mib, h.file_mib, h.n_samples
               from host_memory_cells h left join cells c on c.id = h.cell_id
               where h.load_id = ? and h.status = 'ok' order by h.id""", [load_id]))
    except Exception as exc:  # noqa: BLE001 -- a store from before the table: no per-cell figures
        if "no such table" in str(exc):
            return []
        raise


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
        "any_process": any(r["process"].get("peak_rss_mib") is not None for r in rows),
        "any_process_split": any(r["process"].get("file_mib") is not None for r in rows),
        "foreign_pids": foreign,
        "labels": CATEGORY_LABEL,
    }


def memory_json(db, run_id: int) -> str:
    """The view as JSON (for debugging and for other renderers)."""
    return json.dumps(memory_view(db, run_id), default=str, indent=1)
