"""The order a run measured in: the article's "Measurement order" section.

Read from the rows alone. The order is the samples' own: a run is
*interleaved* where a model's main-cell samples have another model's between
them, else in *blocks*; why the runner chose so is said again from what the
run stored (its backend and the server's ``/props``, ``daemon/order.py``).
Each block -- a model's main cells, load, rate and depth steps, canaries,
probes -- is listed with when it ran, in seconds after the run began.

"""

from __future__ import annotations

import json
from datetime import datetime

from cardproof.daemon.order import interleave
from cardproof.daemon.said import said_json


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


def order_view(db, view: dict) -> dict:
    """The article's Measurement order section: the order, why and the blocks in time."""
    run = view["run"]
    # the campaign's models: a variant (base~name) is measured after every one of them, on a server of its own
    names = {m["name"] for m in view["models"]}
    cells = [c for c in view["cells"] if c["model"] in names]
    model_of = {c["id"]: c["model"] for c in cells}
    samples = [s for s in view["samples"] if s["cell_id"] in model_of]
    models = list(dict.fromkeys(model_of[s["cell_id"]] for s in sorted(samples, key=lambda s: s["id"])))
    props = view.get("props") if isinstance(view.get("props"), dict) else {}
    allowed, why = interleave(run.get("backend"), props, len(models))
    return {
        "mode": None if not samples else ("interleaved" if _interleaved(samples, model_of) else "blocks"),
        "models": models,
        "why_json": json.dumps(said_json(why), ensure_ascii=False),
        "why_text": why.english(),
        "allowed": allowed,
        "blocks": _blocks(db, run["id"], run.get("started_at")),
    }
