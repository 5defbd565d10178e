"""The order a run measured in, and how busy the machine was: the article's "Measurement order" section.

Read from the rows alone. The order is the samples' own: a run is
*interleaved* where a model's main-cell samples have another model's between
them, else in *blocks*; why the runner chose so is said again from what the
run stored (its backend and the server's ``/props``, ``daemon/campaign/order.py``).
Each block -- a model's main cells, load, rate and depth steps, canaries,
probes -- is listed with when it ran, in seconds after the run began.

The machine's load comes from the cell checks' CPU readings around each main
cell (``daemon/host/load.py``): the share of a core other processes used
beside the server and cardproof, and the load average.

In short, ``run_order.py``: the article's *Measurement order and machine load*
section (``templates/sections/order.md.j2``): interleaved or in blocks as the samples' own order
shows, why (``daemon/campaign/order.py`` on the stored backend and ``/props``), each model's blocks
(main cells, load, rate and depth steps, canaries, probes) in seconds after the run began, and the
other processes' share of a core and the load average around the main cells (``daemon/host/load.py``
on the ``host_cpu`` cell checks) with the ``busy_host`` gate's count
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime

from cardproof.daemon.campaign.evidence import foreign_cores
from cardproof.daemon.campaign.order import interleave
from cardproof.daemon.store.said import said_json
from cardproof.daemon.store import json_value


def _(message: str) -> str:
    """A message id of the catalogue, marked for its extractor; the template says it in the page's language."""
    return message


#: sample kind -> the block's name in the table
BLOCK_NAMES = {"measure": _("main cells"), "load": _("load steps"), "rate": _("rate steps"),
               "depth": _("depth steps"), "canary": _("canaries"), "probe": _("probes")}


def _offset(at, began) -> float | None:
    try:
        return (datetime.fromisoformat(at) - datetime.fromisoformat(began)).total_seconds()
    except (TypeError, ValueError):
        return None


def _blocks(db, run_id: int, began) -> list[dict]:
    """Per model and kind of request: when its first and last request went out, and how many there were."""
    rows = list(db.query(
        """select models.name as model, coalesce(samples.kind, 'measure') as kind, samples.id, samples.started_at as at
           from samples join cells on cells.id = samples.cell_id join models on models.id = cells.model_id
           where samples.run_id = ? order by samples.id""", [run_id]))
    if "probe_results" in db.table_names():
        rows += [dict(r, kind="probe") for r in db.query(
            """select models.name as model, probe_results.id, probe_results.at from probe_results
               join models on models.id = probe_results.model_id where probe_results.run_id = ?""", [run_id])]
    blocks: dict[tuple[str, str], dict] = {}
    for r in rows:
        t = _offset(r["at"], began)
        if t is None:
            continue
        b = blocks.setdefault((r["model"], r["kind"]), {"model": r["model"], "kind": r["kind"],
                                                        "name": BLOCK_NAMES.get(r["kind"], r["kind"]),
                                                        "start": t, "end": t, "n": 0})
        b["start"], b["end"], b["n"] = min(b["start"], t), max(b["end"], t), b["n"] + 1
    return sorted(blocks.values(), key=lambda b: (b["start"], b["model"]))


def _interleaved(samples: list[dict], model_of: dict[int, str]) -> bool:
    """Whether some model's main-cell samples have another model's between them (in the order they were sent)."""
    seq = [model_of.get(s["cell_id"]) for s in sorted(samples, key=lambda s: s["id"])]
    seen_done: set[str] = set()
    last = None
    for m in seq:
        if m != last:
            if m in seen_done:
                return True
            if last is not None:
                seen_done.add(last)
            last = m
    return False


def _host(db, cell_ids: list[int]) -> dict | None:
    """Other processes' share of a core and the load average over the main cells, where they were read."""
    if not cell_ids:
        return None
    marks = ",".join("?" * len(cell_ids))
    readings: dict[int, dict] = {}
    for r in db.query(f"""select cell_id, phase, value_json from cell_checks where "check" = 'host_cpu'
                          and cell_id in ({marks})""", cell_ids):
        value = json_value(r["value_json"], dict)
        if value is not None:
            readings.setdefault(r["cell_id"], {})[r["phase"]] = value
    per_cell = [foreign_cores(p["before"], p["after"]) for p in readings.values() if "before" in p and "after" in p]
    per_cell = [h for h in per_cell if h is not None]
    if not per_cell:
        return None
    foreign = [h["foreign_cores"] for h in per_cell]
    load = [h["load_avg"] for h in per_cell]
    return {"cells": len(per_cell), "of": len(cell_ids), "cores": per_cell[0]["cores"],
            "foreign_median": statistics.median(foreign), "foreign_low": min(foreign), "foreign_high": max(foreign),
            "load_low": min(load), "load_high": max(load)}


def order_view(db, view: dict) -> dict:
    """The article's Measurement order section: the order, why, the blocks in time and the machine's load."""
    run = view["run"]
    # the campaign's models: a variant (base~name) is measured after every one of them, on a server of its own
    names = {m["name"] for m in view["models"]}
    cells = [c for c in view["cells"] if c["model"] in names]
    model_of = {c["id"]: c["model"] for c in cells}
    samples = [s for s in view["samples"] if s["cell_id"] in model_of]
    models = list(dict.fromkeys(model_of[s["cell_id"]] for s in sorted(samples, key=lambda s: s["id"])))
    props = view.get("props") if isinstance(view.get("props"), dict) else {}
    allowed, why = interleave(run.get("backend"), props, len(models))
    gates = {g["gate"]: g for g in view.get("gates") or []}
    return {
        "mode": None if not samples else ("interleaved" if _interleaved(samples, model_of) else "blocks"),
        "models": models,
        "why_json": json.dumps(said_json(why), ensure_ascii=False),
        "why_text": why.english(),
        "allowed": allowed,
        "blocks": _blocks(db, run["id"], run.get("started_at")),
        "host": _host(db, [c["id"] for c in cells]),
        "busy_gate": gates.get("busy_host"),
    }
