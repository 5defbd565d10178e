"""The article's fit table: per model and context, fits on the cards or not, from ``fit_checks``.

Every figure links to the log line it was read from (``#line-<id>``, on the
run's evidence page). A row whose verdict lacks part of its evidence -- no
offload line, no KV line, no card reading -- says so in a caveat: a "fits"
resting on partial evidence is never shown as plain.

In short, ``axes.py``, ``fit.py``: the article's Load (streams and Poisson rates) and
Context depth sections and their charts, from ``daemon/store/stats.py`` and
``daemon/campaign/slo.py``; the fit table (``templates/sections/fit.md.j2``), every figure linked to
its log line. Every load, rate and depth step row links to ``#step-<id>`` on the evidence page,
which links back to ``#fig-step-<id>``
"""

from __future__ import annotations

import math
import sqlite3
from cardproof.marks import N_

from cardproof.daemon.store import json_value

#: verdict -> the words the table shows (catalogue message ids)
VERDICT_WORDS = {"fits": "fits", "does_not_fit": N_("does not fit"), "not_on_card": N_("not on a card"),
                 "refused": "refused", "unknown": "no verdict"}
#: what a "fits" needs and a load may not give (fit_evidence.judge's names) -> catalogue message ids
MISSING_WORDS = {"offloaded layers": N_("no offload line in the log"), "KV buffer": N_("no KV buffer line in the log"),
                 "context size": N_("no context size in the log"), "card memory": N_("no card memory reading")}


def _num(value):
    """A stored figure, or None for NULL and anything a damaged row holds instead of a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def fit_view(db, run_id: int) -> list[dict]:
    """Per model (in the order tested): its fit rows with figures, evidence line ids and caveats."""
    conn = db.conn if hasattr(db, "conn") else db
    try:
        cur = conn.execute(
            "select f.*, m.name as model from fit_checks f left join models m on m.id = f.model_id "
            "where f.run_id = ? order by f.position, f.id", [run_id])
    except sqlite3.OperationalError:  # a database from before m020: no fit test to show
        return []
    names = [d[0] for d in cur.description]
    by_model: dict[str, list[dict]] = {}
    for values in cur.fetchall():
        r = dict(zip(names, values))
        evidence = json_value(r.get("evidence_json"), dict, {})
        cite = {k: v[0] for k, v in evidence.items()
                if k != "missing" and isinstance(v, list) and v and isinstance(v[0], int)}
        missing = [MISSING_WORDS[m] for m in evidence.get("missing", []) if m in MISSING_WORDS] \
            if isinstance(evidence.get("missing"), list) else []
        resident, total = _num(r.get("resident_mib")), _num(r.get("card_total_mib"))
        buffers = json_value(r.get("buffers_json"), dict, {})
        by_model.setdefault(r.get("model") or "?", []).append({
            "id": r["id"], "context": _num(r.get("context_tokens")), "verdict": r.get("verdict"),
            "verdict_words": VERDICT_WORDS.get(r.get("verdict"), None),
            "reasons_json": r.get("reasons_json"), "reasons_text": r.get("reasons_text"),
            "ctx_size": _num(r.get("ctx_size")), "n_ctx_train": _num(r.get("n_ctx_train")),
            "layers": (_num(r.get("offloaded_layers")), _num(r.get("total_layers"))),
            "kv_card_mib": _num(r.get("kv_card_mib")), "kv_host_mib": _num(r.get("kv_host_mib")),
            "buffers": [{"device": str(d), "mib": sum(v for v in b.values() if _num(v) is not None),
                         "line": cite.get(f"device:{d}", cite.get("buffers"))}
                        for d, b in sorted(buffers.items()) if isinstance(b, dict)],
            "resident_mib": resident, "card_total_mib": total, "free_mib": _num(r.get("free_mib")),
            "share": resident / total if resident is not None and total else None,
            "memory_note": r.get("memory_note"),
            # a load in host memory (CPU, unified): its process's peak against MemAvailable before it
            "host_verdict": r.get("host_verdict"), "host_verdict_words": VERDICT_WORDS.get(r.get("host_verdict")),
            "host_peak_mib": _num(r.get("host_peak_mib")), "host_anon_mib": _num(r.get("host_anon_mib")),
            "host_available_mib": _num(r.get("host_available_mib")),
            "request_ok": r.get("request_ok"), "load_id": r.get("load_id"),
            "cite": cite, "missing": missing if r.get("verdict") == "fits" else [],
        })
    return [{"model": m, "rows": rows, "max_context": max((x["context"] for x in rows if x["verdict"] == "fits"
                                                           and x["context"] is not None), default=None)}
            for m, rows in by_model.items()]
