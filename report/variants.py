"""The article's Variants section: each variant against its model, per prompt class, stated only where measurable.

A variant is measured as a model of its own (``base~name``, see
``daemon/run/variants/run.py``); ``queries.run_view`` keeps such models out of the
headline and the main table and hands them here. Per class, each variant's
decode and prefill medians are set against its base's by the rules every
other comparison of the report follows (``findings.cells_measurable``: ranges
apart *and* the samples apart beyond their scatter); where they are not, the
page says "no measurable difference", never a ratio. A variant whose log
contradicts its arguments states nothing (a caveat says why), and the best
variant of a class is named only where it is measurably ahead of every other
candidate, its base included, and its log proved every argument.

In short, ``variants.py``: the Variants section
(``templates/sections/variants.md.j2``): per model its variants' arguments, each argument's verdict
linked to its log line (``evidence.py`` prints every cited line), card memory with the self-report
beside it, the server process's peak resident memory on the host (psutil) and the KV cache from the
log; per prompt class each variant against its model in decode and prefill by
``findings.measurable`` (a ratio range only where measurable), nothing from an unstable cell or a
contradicted variant (caveat ``variant_contradicted``), the fastest candidate named only where
measurably ahead of every other and proven by its log; its charts are drawn in
``article_parts.run_charts``
"""

from __future__ import annotations

import math
import shlex

from cardproof.daemon.campaign.evidence import load_summary
from cardproof.daemon.campaign.evidence import is_card_device
from cardproof.daemon.campaign.evidence import reconcile_load
from cardproof.daemon.campaign.variant_evidence import check_variant
from cardproof.daemon.store import json_value
from cardproof.marks import N_

#: a variant's status (daemon/campaign/variant_evidence.py) -> the words the page shows (catalogue message ids)
STATUS_WORDS = {"took": N_("every argument took"), "partly": N_("partly shown in the log"),
                "contradicted": N_("contradicted by its log"), "failed": N_("not loaded"), "refused": N_("not loaded"),
                "no_log": N_("no log lines"), "planned": N_("not judged"), "measuring": N_("not judged")}
#: a check's status -> catalogue message id
CHECK_WORDS = {"took": "took", "contradicted": "contradicted", "not shown": N_("not shown in the log"),
               "not checked": N_("not checked")}
STATES_A_FINDING = ("took", "partly")


def variant_rows(db, run_id: int) -> list[dict]:
    """The run's ``variants`` rows with their model names; none in a store from before them."""
    try:
        return list(db.query(
            "select v.*, m.name as model, b.name as base from variants v join models m on m.id = v.model_id "
            "join models b on b.id = v.base_model_id where v.run_id = ? order by v.position, v.id", [run_id]))
    except Exception:  # noqa: BLE001 -- an older store has no variants table: no section
        return []


def rederived(db, row: dict) -> tuple[str | None, list[dict]]:
    """(status, checks) of a variant, read again from its load's stored lines.

    The run stored its verdict when it ended; the page states what the lines in the store say now (a
    line attributed later, a store merged from another host with its ids renumbered), by the same
    check. A variant never loaded keeps its stored status and has no checks.
    """
    conn = db.conn if hasattr(db, "conn") else db
    if row.get("load_id") is None or row.get("status") in ("refused", "failed"):
        return row.get("status"), []
    lines = conn.execute("select id, raw from log_lines where load_id = ? order by id", [row["load_id"]]).fetchall()
    args = [a for a in json_value(row.get("args_json"), list, []) if isinstance(a, str)]
    status, checks = check_variant(args, [(i, raw or "") for i, raw in lines])
    return status, [c.to_json() for c in checks]


def _values(cell: dict, column: str) -> list[float]:
    return [s[column] for s in cell["valid"] if isinstance(s.get(column), (int, float))]


def _spread(cell: dict, metric: str):
    return cell.get("decode" if metric == "decode" else "prefill")


def compare(variant_cell: dict | None, base_cell: dict | None, metric: str) -> dict:
    """One variant cell against its base's, in ``metric`` (decode or prefill).

    ``state``: ``measurable`` (with ``ratio`` and its range), ``same`` (no
    measurable difference), ``unstable`` (either cell), ``missing`` (no valid sample).
    """
    from .findings import measurable

    column = "decode_tps" if metric == "decode" else "prefill_tps"
    a = _spread(variant_cell, metric) if variant_cell else None
    b = _spread(base_cell, metric) if base_cell else None
    if a is None or b is None:
        return {"state": "missing"}
    if variant_cell.get("unstable") or base_cell.get("unstable"):
        return {"state": "unstable"}
    if not measurable(a, b, _values(variant_cell, column), _values(base_cell, column)) or not b.median:
        return {"state": "same"}
    return {"state": "measurable", "ratio": a.median / b.median,
            "low": a.low / b.high if b.high else None, "high": a.high / b.low if b.low else None}


def _best(candidates: list[tuple[str, dict]], metric: str) -> dict | None:
    """The candidate (variant or base) measurably ahead of every other in ``metric``; None where none is."""
    from .findings import measurable

    column = "decode_tps" if metric == "decode" else "prefill_tps"
    rated = [(name, c) for name, c in candidates if c and _spread(c, metric) and not c.get("unstable")]
    if len(rated) < 2:
        return None
    rated.sort(key=lambda nc: _spread(nc[1], metric).median, reverse=True)
    name, top = rated[0]
    for _, other in rated[1:]:
        if not measurable(_spread(top, metric), _spread(other, metric), _values(top, column), _values(other, column)):
            return None
    return {"name": name, "cell": top["id"], "median": _spread(top, metric).median}


def _memory(db, load_id: int | None) -> dict:
    """Card memory of the variant's load (with the self-report beside it), its server process's memory on the
    host (psutil: peak resident, and its anonymous part) and its KV cache as its log states it."""
    out = {"card_mib": None, "selfreport_mib": None, "selfreport_host": False, "kv_mib": None, "kv_line": None,
           "process": None}
    if load_id is None:
        return out
    try:
        out["process"] = load_summary(db, load_id)
        rec = reconcile_load(db, load_id)
        out["card_mib"] = rec["card"].get("card_mib")
        sr = rec.get("selfreport") or {}
        devices = (sr.get("items") or {}).get("devices") or {}
        # a breakdown that names no card (a CPU host) reports host memory: its card figure is 0 by construction
        out["selfreport_host"] = bool(devices) and not any(is_card_device(d) for d in devices)
        out["selfreport_mib"] = sr.get("total_mib") if out["selfreport_host"] else sr.get("gpu_mib")
        kv = list(db.query("select value_num, line_id from facts where load_id = ? and name = 'kv_buffer_mib' "
                           "and value_num is not null order by id", [load_id]))
    except Exception:  # noqa: BLE001 -- a damaged row: the memory columns say "not measured"
        return out
    if kv:
        out["kv_mib"] = sum(r["value_num"] for r in kv if math.isfinite(r["value_num"]))
        out["kv_line"] = kv[0]["line_id"]
    return out


def variants_view(db, run_id: int, models: list[dict], variant_models: dict[str, dict],
                  rows: list[dict], classes: list[str]) -> list[dict]:
    """Per base model with variants: its variants (arguments, evidence, memory) and per class the comparisons."""
    by_base: dict[str, list[dict]] = {}
    for r in rows:
        status, checks = rederived(db, r)
        entry = {
            "id": r["id"], "name": r["name"], "model": r["model"], "source": r.get("source"),
            "args": [a for a in json_value(r.get("args_json"), list, []) if isinstance(a, str)],
            # as a shell would take it: a pattern's backslashes and spaces shown as typed
            "args_text": shlex.join(a for a in json_value(r.get("args_json"), list, []) if isinstance(a, str)),
            "server_args": [a for a in json_value(r.get("server_args_json"), list, []) if isinstance(a, str)],
            "base_args_source": r.get("base_args_source"), "server_kind": r.get("server_kind"),
            "status": status, "status_words": STATUS_WORDS.get(status),
            "note": r.get("note"), "load_id": r.get("load_id"),
            "checks": [c | {"words": CHECK_WORDS.get(c.get("status"))} for c in checks if isinstance(c, dict)],
            "states": status in STATES_A_FINDING,
            "memory": _memory(db, r.get("load_id")),
            "cells": (variant_models.get(r["model"]) or {}).get("cells", {}),
        }
        by_base.setdefault(r["base"], []).append(entry)
    base_models = {m["name"]: m for m in models}
    out = []
    for base, variants in by_base.items():
        bm = base_models.get(base) or {"cells": {}, "loads": []}
        base_load = next((ld["id"] for ld in reversed(bm.get("loads", [])) if ld.get("measured")), None)
        per_class = []
        for cls in classes:
            for reasoning in (False, True):
                base_cell = bm["cells"].get((cls, reasoning))
                cells = [(v, v["cells"].get((cls, reasoning))) for v in variants]
                if not any(c for _, c in cells):
                    continue
                entries = []
                for v, c in cells:
                    entries.append({"variant": v, "cell": c,
                                    "decode": compare(c, base_cell, "decode") if v["states"] else {"state": "none"},
                                    "prefill": compare(c, base_cell, "prefill") if v["states"] else {"state": "none"}})
                # only a variant whose log proved every argument can be named best; its base competes too
                candidates = [(base, base_cell)] + [(v["name"], c) for v, c in cells if v["status"] == "took"]
                per_class.append({"cls": cls, "reasoning": reasoning, "base_cell": base_cell, "entries": entries,
                                  "best_decode": _best(candidates, "decode"),
                                  "best_prefill": _best(candidates, "prefill")})
        out.append({"base": base, "variants": variants, "classes": per_class, "base_memory": _memory(db, base_load),
                    "base_load": base_load})
    return out
