"""What the runtime says it uses: stored beside the card's figure, never instead of it.

Sources:
- llama-server's memory breakdown table (``common_memory_breakdown_print`` /
  ``llama_memory_breakdown_print``; ``llama_print_memory_breakdown`` in the
  first form, llama.cpp PR #15860). Printed while fitting parameters to the
  free memory (a projection) and again at exit (what was allocated).
- the load's buffer facts (model/KV/compute/output per device), when the
  server printed no breakdown for the cards;
- Ollama ``GET /api/ps``: ``size`` and ``size_vram`` in bytes; ``size_vram``
  is omitted when the model sits entirely in system memory (Ollama docs/api.md).

``covers`` names the items a self-report includes; reconciliation itemises
the gap from the items it does not.
"""

from __future__ import annotations

import json
import re

from ..store import Store, dumps, utcnow
from .readings import MIB, is_card_device

_FUNC = re.compile(r"(?:common_memory_breakdown_print|llama_memory_breakdown_print|llama_print_memory_breakdown):")
_NUM = r"(-?\d+)"
_DEVICE = re.compile(
    r"-\s+(?P<dev>[A-Za-z][\w]*?)(?:\s+\((?P<desc>[^)]*)\))?\s*[|:]\s*"
    rf"{_NUM}\s*=\s*{_NUM}\s*\+\s*\(\s*{_NUM}\s*=\s*{_NUM}\s*\+\s*{_NUM}\s*\+\s*{_NUM}\s*\)\s*\+\s*{_NUM}"
)
# host rows carry no free/unaccounted columns; the first form printed a total first
_HOST = re.compile(
    r"-\s+(?P<dev>[A-Za-z][\w]*?)(?:\s+\((?P<desc>[^)]*)\))?\s*[|:]\s*(?:(?P<total>\d+)\s+)?"
    rf"{_NUM}\s*=\s*{_NUM}\s*\+\s*{_NUM}\s*\+\s*{_NUM}\s*\|?\s*$"
)
_EXIT_HINT = re.compile(r"exiting|cleaning up before exit|exit command received", re.I)

# What each kind of self-report already contains (vocabulary of reconcile.py).
COVERS = {
    "exit": ["weights", "kv", "compute", "output"],  # self = model + context + compute per device
    "projection": ["weights", "kv", "compute", "output"],
    "facts": ["weights", "kv", "compute", "output"],
    # Ollama does not publish what size_vram includes; the seeds show compute
    # buffers, the draft context and the projector missing from it.
    "ps": ["weights", "kv"],
    # Ollama's scheduler plan from its log (device.go lines): what it expects to place per device
    "plan": ["weights", "kv", "compute"],
}
_PLAN_ITEMS = {"plan_weights_mib": "weights", "plan_kv_mib": "kv", "plan_compute_mib": "compute"}


def parse_breakdown(lines) -> list[dict]:
    """Memory breakdown blocks in ``lines`` (``(line_id, raw)`` pairs or strings).

    Each block: ``{"phase": "exit"|"projection", "devices": {name: {...MiB}},
    "line_ids": [...]}``. The phase comes from the lines before the block: a
    table printed after "exiting" is what was allocated; one printed while
    fitting is a projection.
    """
    blocks, current, recent = [], None, []
    for item in lines:
        line_id, raw = item if isinstance(item, tuple) else (None, item)
        func = _FUNC.search(raw)
        if func is None:
            if current is not None:
                blocks.append(current)
                current = None
            recent = (recent + [raw])[-6:]
            continue
        text = raw[func.end():]
        if "memory breakdown" in text:
            if current is not None:
                blocks.append(current)
            phase = "exit" if any(_EXIT_HINT.search(r) for r in recent) else "projection"
            current = {"phase": phase, "devices": {}, "line_ids": [line_id] if line_id is not None else []}
            continue
        if current is None:
            continue
        m = _DEVICE.search(text)
        if m:
            total, free, self_, model, context, compute, unacc = (int(x) for x in m.groups()[2:])
            current["devices"][m["dev"]] = {
                "description": m["desc"], "total": total, "free": free, "self": self_, "model": model,
                "context": context, "compute": compute, "unaccounted": unacc,
            }
        else:
            h = _HOST.search(text)
            if not h:
                continue
            self_, model, context, compute = (int(x) for x in h.groups()[3:])
            current["devices"][h["dev"]] = {
                "description": h["desc"], "total": int(h["total"]) if h["total"] else None, "self": self_,
                "model": model, "context": context, "compute": compute,
            }
        if line_id is not None:
            current["line_ids"].append(line_id)
    if current is not None:
        blocks.append(current)
    return blocks


def breakdown_selfreport(blocks: list[dict]) -> dict | None:
    """The block that stands for the load: the last exit table, else the last projection."""
    if not blocks:
        return None
    exits = [b for b in blocks if b["phase"] == "exit"]
    block = (exits or blocks)[-1]
    gpu = sum(d["self"] for name, d in block["devices"].items() if is_card_device(name))
    total = sum(d["self"] for d in block["devices"].values())
    return {
        "source": "llama-server memory breakdown", "kind": block["phase"],
        "gpu_mib": float(gpu), "total_mib": float(total),
        "items": {"devices": block["devices"], "covers": COVERS[block["phase"]]},
        "line_ids": block["line_ids"],
    }


def facts_selfreport(facts: list[dict]) -> dict | None:
    """Sum of the buffers the server printed for the cards (model, KV, compute, output)."""
    names = ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib", "output_buffer_mib",
             # named apart by newer servers (the SWA cache, the projector's compute, an adapter), card memory all the same
             "kv_swa_buffer_mib", "projector_compute_mib", "lora_buffer_mib")
    rows = [f for f in facts if f["name"] in names and f.get("value_num") is not None]
    if not rows:
        return None
    gpu = sum(f["value_num"] for f in rows if is_card_device(f.get("device")))
    total = sum(f["value_num"] for f in rows)
    return {
        "source": "llama-server buffer lines", "kind": "facts", "gpu_mib": round(gpu, 3),
        "total_mib": round(total, 3), "items": {"covers": COVERS["facts"]},
        "line_ids": sorted({f["line_id"] for f in rows if f.get("line_id") is not None}),
    }


def plan_selfreport(facts: list[dict]) -> dict | None:
    """Ollama's memory plan for a load from its log facts (``plan_*``): per item and device, and the total."""
    rows = [f for f in facts if f["name"] in _PLAN_ITEMS and f.get("value_num") is not None]
    total = [f for f in facts if f["name"] == "plan_total_mib" and f.get("value_num") is not None]
    if not rows and not total:
        return None
    by_item: dict[str, dict[str, float]] = {}
    for f in rows:
        by_item.setdefault(_PLAN_ITEMS[f["name"]], {})[f.get("device") or "?"] = f["value_num"]
    gpu = sum(f["value_num"] for f in rows if is_card_device(f.get("device"))) if rows else None
    return {
        "source": "ollama scheduler plan (log)", "kind": "plan",
        "gpu_mib": round(gpu, 3) if gpu is not None else None,
        "total_mib": round(total[-1]["value_num"], 3) if total else round(sum(f["value_num"] for f in rows), 3),
        "items": {"covers": COVERS["plan"], "by_item": by_item},
        "line_ids": sorted({f["line_id"] for f in rows + total if f.get("line_id") is not None}),
    }


def record_plan_selfreport(store: Store, run_id: int | None, load_id: int) -> int | None:
    """Store Ollama's plan for a load once, when its log facts carry one."""
    if store.db.execute("select 1 from memory_selfreports where load_id = ? and kind = 'plan'", [load_id]).fetchone():
        return None
    facts = [dict(zip(("name", "device", "value_num", "line_id"), r)) for r in store.db.execute(
        "select name, device, value_num, line_id from facts where load_id = ? and name like 'plan_%' order by id",
        [load_id])]
    return store_selfreport(store, run_id, load_id, plan_selfreport(facts))


def ollama_selfreport(ps: dict, model: str) -> dict | None:
    """The /api/ps entry for ``model`` as a self-report; GPU share = size_vram / size."""
    for entry in ps.get("models", []):
        if model in (entry.get("name"), entry.get("model")):
            size = entry.get("size") or 0
            vram = entry.get("size_vram") or 0  # omitted = nothing on the card
            return {
                "source": "ollama /api/ps", "kind": "ps",
                "gpu_mib": round(vram / MIB, 3), "total_mib": round(size / MIB, 3),
                "items": {"covers": COVERS["ps"], "gpu_share": (vram / size) if size else None,
                          "context_length": entry.get("context_length"), "raw": entry},
                "line_ids": [],
            }
    return None


def gpu_share(ps: dict, model: str) -> float | None:
    """Ollama's own figure for the share on the card (the ``not_on_card`` gate reads it)."""
    rep = ollama_selfreport(ps, model)
    return rep["items"]["gpu_share"] if rep else None


def store_selfreport(store: Store, run_id: int | None, load_id: int | None, rep: dict | None) -> int | None:
    """Write one self-report row; None in, None out."""
    if rep is None:
        return None
    return store.insert(
        "memory_selfreports",
        {"run_id": run_id, "load_id": load_id, "ts": utcnow(), "source": rep["source"], "kind": rep["kind"],
         "total_mib": rep["total_mib"], "gpu_mib": rep["gpu_mib"], "items_json": dumps(rep["items"]),
         "line_ids_json": dumps(rep["line_ids"])},
    )


def record_llama_selfreport(store: Store, run_id: int | None, load_id: int) -> int | None:
    """Self-report of a llama-server load from its attributed log lines, else its facts."""
    lines = [(r[0], r[1]) for r in store.db.execute(
        "select id, raw from log_lines where load_id = ? order by id", [load_id])]
    rep = breakdown_selfreport(parse_breakdown(lines))
    if rep is None or rep["kind"] == "projection":
        # buffers the server reports having allocated beat a table it projected
        facts = [dict(zip(("name", "device", "value_num", "line_id"), r)) for r in store.db.execute(
            "select name, device, value_num, line_id from facts where load_id = ?", [load_id])]
        rep = facts_selfreport(facts) or rep
    return store_selfreport(store, run_id, load_id, rep)


def record_ollama_selfreport(store: Store, run_id: int | None, load_id: int, ps: dict, model: str) -> int | None:
    """Store Ollama's /api/ps figure for ``model`` beside the card's."""
    return store_selfreport(store, run_id, load_id, ollama_selfreport(ps, model))


def latest_selfreport(db, load_id: int) -> dict | None:
    """The self-report reconciliation uses: exit table > ps > facts > projection."""
    order = {"exit": 0, "ps": 1, "facts": 2, "projection": 3, "plan": 4}
    rows = list(db.query("select * from memory_selfreports where load_id = ? order by id", [load_id]))
    if not rows:
        return None
    rows.sort(key=lambda r: (order.get(r["kind"], 9), -r["id"]))
    best = rows[0]
    best["items"] = json.loads(best.get("items_json") or "{}")
    return best
