"""Card minus self-report: the gap, itemised from the load's own log facts.

The items come from the load's facts (as daemon/logs/parsers/ name them): compute buffer
per device, KV cache, weights, output buffer, draft/MTP context, projector.
Items the self-report already covers are shown on its side; the others
explain the gap, and what they do not explain stays visible as
``unexplained`` (negative when the items exceed the gap: overlap or
over-estimates, said so rather than clipped).
"""

from __future__ import annotations

from collections import defaultdict

from cardproof.marks import N_
from .attribution import load_memory
from .readings import is_card_device
from .selfreport import latest_selfreport

# fact name -> item category
CATEGORY = {
    "model_buffer_mib": "weights",
    "lora_buffer_mib": "weights",  # an adapter's weights (Ollama prints its LoRA buffer per device)
    "kv_buffer_mib": "kv",
    "kv_swa_buffer_mib": "kv",  # the second KV cache of a sliding-window model
    "compute_buffer_mib": "compute",
    "projector_compute_mib": "compute",  # the vision projector's compute buffer
    "output_buffer_mib": "output",
    "draft_context_mib": "draft",
    "projector_mib": "projector",
}
# one object per load, however often its size is printed (fit pass, load pass)
_SINGLE = {"draft", "projector"}
ORDER = ("weights", "kv", "compute", "output", "draft", "projector")


def _note(msg: str, detail: str | None = None) -> dict:
    """A note as a fixed sentence (translated by the report) plus the variable part."""
    return {"msg": msg, "detail": detail}


def load_facts(db, load_id: int) -> list[dict]:
    """The load's memory facts with the raw line each came from."""
    names = tuple(CATEGORY)
    return list(
        db.query(
            f"""select facts.name, facts.device, facts.value_num, facts.value_text, facts.line_id,
                       log_lines.raw as raw
                from facts left join log_lines on log_lines.id = facts.line_id
                where facts.load_id = ? and facts.name in ({",".join("?" * len(names))})
                order by facts.id""",
            [load_id, *names],
        )
    )


def _estimated(fact: dict) -> bool:
    text = f"{fact.get('raw') or ''} {fact.get('value_text') or ''}".lower()
    return "estimat" in text


def items_from_facts(facts: list[dict]) -> tuple[list[dict], list[str]]:
    """Card items per category and device, and notes on what was left out.

    Buffers on host devices (CPU, CPU_Mapped, CUDA_Host) are not card memory
    and are skipped. Buffer lines of one name and device are summed: each is
    a separate allocation (main and draft model each print their own).
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    notes = []
    for f in facts:
        cat = CATEGORY.get(f["name"])
        if cat is None or f["value_num"] is None:
            continue
        dev = f.get("device")
        if not dev and cat not in _SINGLE:
            notes.append(_note(N_("a buffer line without a device was not counted"), f["name"]))
            continue
        if dev and not is_card_device(dev):
            continue  # host memory (a projector kept on the CPU, CPU_Mapped weights)
        groups[(cat, dev)].append(f)
    items = []
    for (cat, dev), fs in groups.items():
        values = [f["value_num"] for f in fs]
        mib = max(values) if cat in _SINGLE else sum(values)
        items.append(
            {
                "category": cat, "device": dev, "mib": round(mib, 3), "lines": len(fs),
                "estimated": any(_estimated(f) for f in fs),
                "line_ids": [f["line_id"] for f in fs if f.get("line_id") is not None],
            }
        )
        if cat in _SINGLE and len(set(values)) > 1:
            notes.append(_note(N_("printed more than once with different values; the largest is used"), cat))
    items.sort(key=lambda i: (ORDER.index(i["category"]), i["device"] or ""))
    return items, notes


def reconcile(card_mib: float | None, selfreport: dict | None, facts: list[dict]) -> dict:
    """Pure reconciliation of one load (the recorded-reading tests call it directly)."""
    items, notes = items_from_facts(facts)
    covers = set((selfreport or {}).get("items", {}).get("covers", []))
    for item in items:
        item["in_selfreport"] = item["category"] in covers
    gap_items = [i for i in items if not i["in_selfreport"]]
    sr_gpu = selfreport.get("gpu_mib") if selfreport else None
    gap = card_mib - sr_gpu if card_mib is not None and sr_gpu is not None else None
    explained = round(sum(i["mib"] for i in gap_items), 3) if gap_items else 0.0
    unexplained = round(gap - explained, 3) if gap is not None else None
    estimated = sorted({i["category"] for i in gap_items if i["estimated"]}, key=ORDER.index)
    if estimated:
        notes.append(_note(N_("printed by the server as estimates; the log does not say whether they overlap"),
                           ", ".join(estimated)))
    if unexplained is not None and unexplained < 0:
        notes.append(_note(N_("the items exceed the gap: some overlap, or an estimate is high")))
    by_cat: dict = defaultdict(float)
    compute_by_device: dict = {}
    for i in items:
        by_cat[i["category"]] += i["mib"]
        if i["category"] == "compute":
            compute_by_device[i["device"]] = i["mib"]
    itemised = round(sum(by_cat.values()), 3)
    return {
        "card_mib": card_mib,
        "selfreport": selfreport,
        "gap_mib": round(gap, 3) if gap is not None else None,
        "items": items,
        "gap_items": gap_items,
        "explained_mib": explained,
        "unexplained_mib": unexplained,
        "estimated": estimated,
        "notes": notes,
        "by_category": {c: round(by_cat[c], 3) for c in ORDER if c in by_cat},
        "compute_by_device": compute_by_device,
        # the card's figure split by the log: what no line names is "rest"
        "rest_mib": round(card_mib - itemised, 3) if card_mib is not None and items else None,
    }


def reconcile_load(db, load_id: int) -> dict:
    """Reconciliation of one stored load: the card (attribution), self-report and facts."""
    card = load_memory(db, load_id)
    out = reconcile(card["card_mib"], latest_selfreport(db, load_id), load_facts(db, load_id))
    out["card"] = card
    return out
