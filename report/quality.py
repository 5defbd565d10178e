"""The article's Quality section: each ladder member and variant, its KL divergence from the ladder's base
beside its decode, prefill and memory, every figure linked to the row or log line it comes from.

Read-only, from ``quality_checks`` (daemon/quality) and the run view. Speed
is read in one prompt class per ladder, the one where most of its rows have
a stable cell (a variant may measure fewer classes than its model), so the
figures beside each other are of the same cells' kind.

In short, ``quality.py``: the Quality section (``templates/sections/quality.md.j2``)
from ``quality_checks``: per ladder its base, each member and variant with KL divergence (mean ±
error, 99th percentile), same top token and perplexity, each linked to llama-perplexity's own line,
beside decode and prefill (the run's stable cells, in the one class where most rows have one, since
a variant may measure fewer classes) and memory (the card, else the file); refusals with their
reasons; the Pareto front and the chart's rows (``charts.quality_chart``, drawn in
``article_parts.run_charts`` where three or more rows have decode and KL divergence). The finding
``findings/quality.py`` reads the same view
"""

from __future__ import annotations

import sqlite3

from .findings.pick import card_rows, number
from cardproof.daemon.store import json_value

#: the quality_checks columns a row of the section shows
FIGURES = ("kld_mean", "kld_mean_err", "kld_median", "kld_p99", "kld_max", "same_top", "same_top_err", "ppl",
           "ppl_err", "ppl_base", "ppl_base_err", "ppl_ratio", "ppl_ratio_err", "chunks", "chunks_asked",
           "context_tokens")


def _cells(view: dict) -> dict[str, dict]:
    """model (variants as ``model~name``) -> (class, reasoning) -> its cell."""
    out = {m["name"]: m.get("cells", {}) for m in view.get("models", [])}
    for group in view.get("variants") or []:
        for v in group.get("variants", []):
            out[v["model"]] = v.get("cells", {})
    return out


def _stable(cells: dict, cls: str) -> dict | None:
    c = cells.get((cls, False)) or cells.get((cls, True))
    return c if c and c.get("decode") and not c.get("unstable") else None


def quality_view(db, run_id: int, view: dict) -> dict:
    """``ladders`` (per base: its class, memory kind and rows) and ``refused`` (rows in no ladder)."""
    conn = db.conn if hasattr(db, "conn") else db
    try:
        cur = conn.execute(
            "select q.*, m.name as model, m.quantisation, m.file_bytes, b.name as base from quality_checks q "
            "left join models m on m.id = q.model_id left join models b on b.id = q.base_model_id "
            "where q.run_id = ? order by q.position, q.id", [run_id])
    except sqlite3.OperationalError:  # a store from before m027
        return {"ladders": [], "refused": []}
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    cells, cards = _cells(view), card_rows(view)
    ladders: dict[str, dict] = {}
    refused = []
    for r in rows:
        entry = {"id": r["id"], "model": r["model"] or "?", "role": r["role"], "variant": r["variant"],
                 "quantisation": r["quantisation"], "status": r["status"], "reason_json": r["reason_json"],
                 "reason_text": r["reason_text"], "load_id": r["load_id"],
                 "cite": _cite(r.get("evidence_json")), **{k: r.get(k) for k in FIGURES}}
        card = cards.get(entry["model"])
        entry["mem"] = {"mib": card["card_mib"], "link": f"fig-load-{card['load_id']}"} if card else \
            {"mib": r["file_bytes"] / 2**20 if number(r.get("file_bytes")) else None, "link": None}
        entry["card"] = card is not None
        if r["base"] is None:
            refused.append(entry)
            continue
        ladder = ladders.setdefault(r["base"], {"base": r["base"], "requantized_from": r["requantized_from"],
                                                "rows": []})
        ladder["rows"].append(entry)
    for ladder in ladders.values():
        ladder["cls"] = _class(view, cells, ladder["rows"])
        for e in ladder["rows"]:
            c = _stable(cells.get(e["model"], {}), ladder["cls"]) if ladder["cls"] else None
            e["decode"] = {"value": c["decode"].median, "link": f"cell-{c['id']}", "cell": c} if c else None
            e["prefill"] = {"value": c["prefill"].median, "link": f"cell-{c['id']}"} \
                if c and c.get("prefill") else None
        ladder["on_card"] = all(e["card"] for e in ladder["rows"])
        ladder["chart"] = len([e for e in ladder["rows"] if e["decode"] and _kld(e) is not None]) >= 3
    return {"ladders": list(ladders.values()), "refused": refused}


def _kld(e: dict) -> float | None:
    """The row's mean KL divergence; the base's is 0 by definition (its logits are the reference)."""
    if e["status"] != "measured":
        return None
    return 0.0 if e["role"] == "base" else e.get("kld_mean")


def _class(view: dict, cells: dict, rows: list[dict]) -> str | None:
    classes = view.get("classes") or []
    if not classes:
        return None
    return max(classes, key=lambda c: (sum(1 for e in rows if _stable(cells.get(e["model"], {}), c)),
                                       -classes.index(c)))


def _cite(text: str | None) -> dict[str, int]:
    return {k: v for k, v in json_value(text, dict, {}).items() if isinstance(v, int)}


def pareto(rows: list[dict]) -> list[str]:
    """The rows no other row beats on both decode (higher) and KL divergence (lower), by model name."""
    points = [(e["model"], e["decode"]["value"], _kld(e)) for e in rows if e["decode"] and _kld(e) is not None]
    return [n for n, d, k in points
            if not any((d2 >= d and k2 <= k) and (d2 > d or k2 < k) for _, d2, k2 in points)]


def chart_rows(ladder: dict) -> list[dict]:
    """The Pareto chart's points: decode against KL divergence, memory as the point's size."""
    front = set(pareto(ladder["rows"]))
    return [{"model": e["model"], "kld": _kld(e), "decode": e["decode"]["value"], "mib": e["mem"]["mib"] or 0,
             "front": e["model"] in front, "cell": e["decode"]["cell"]["id"]}
            for e in ladder["rows"] if e["decode"] and _kld(e) is not None]
