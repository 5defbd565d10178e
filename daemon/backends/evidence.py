"""What the judge and the memory section read from a backend's stored responses.

The backends keep the runtime's own figures in each sample's
``response_json`` (Ollama: ``load_duration`` in ns and the ``/api/ps``
entry taken right after the answer). These functions turn them into the
values the gates take, so the judge needs no backend-specific code.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from ..memory.selfreport import ollama_selfreport, record_plan_selfreport, store_selfreport
from cardproof.daemon.store.said import Said
from ..store import json_value

#: request paths that make a model work (a GET of the model list does not)
_WORK = ("/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/v1/chat/completions",
         "/v1/completions", "/v1/embeddings", "/v1/responses", "/completion", "/infill")


def load_duration_seconds(response: dict) -> float | None:
    """Ollama's ``load_duration`` (ns) in seconds; None where the runtime reports none."""
    ns = response.get("load_duration")
    return ns / 1e9 if isinstance(ns, (int, float)) and not isinstance(ns, bool) else None


def gpu_share(response: dict) -> float | None:
    """``size_vram / size`` of the model's ``/api/ps`` entry (omitted ``size_vram``: nothing on the card)."""
    ps = response.get("ps")
    if not isinstance(ps, dict):
        return None
    size, vram = ps.get("size"), ps.get("size_vram") or 0
    # rows stored before the backend checked these may hold anything
    if not _number(size) or size <= 0 or not _number(vram):
        return None
    return vram / size


def foreign_from_access_log(store, cell_id: int) -> dict | None:
    """Requests from other clients during a cell, from the server's access log (``requests_seen``).

    Our own address is the one each sample left from (``client_addr`` in its
    response). Only log timestamps in the store's UTC format can be put on
    the cell's time line; without them, or without knowing our address,
    there is no source (None) rather than a guess.
    """
    samples = list(store.db.query(
        "select started_at, wall_ms, response_json from samples where cell_id = ? order by id", [cell_id]))
    if not samples:
        return None
    own = {_loads(s["response_json"]).get("client_addr") for s in samples} - {None}
    own = {a for a in own if isinstance(a, str)}
    run_id = store.db.execute("select run_id from cells where id = ?", [cell_id]).fetchone()[0]
    rows = list(store.db.query(
        "select ts, client, method, path from requests_seen where run_id = ? and ts like '%+00:00'", [run_id]))
    if not own or not rows:
        return None
    ends = []
    for s in samples:
        try:  # a row with an unreadable time or duration bounds nothing
            wall = s["wall_ms"] if _number(s["wall_ms"]) else 0
            ends.append(datetime.fromisoformat(s["started_at"]) + timedelta(milliseconds=wall))
        except (TypeError, ValueError, OverflowError):
            continue
    if not ends:
        return None
    start = samples[0]["started_at"]
    end = max(ends).isoformat(timespec="microseconds")
    clients: dict[str, int] = {}
    for r in rows:
        # access loggers (gin, llama-swap) write when a request ends: one that ended inside the
        # cell overlapped it; one still running at the cell's end is seen by the next cell
        if not (start <= r["ts"] <= end) or r["client"] in own or r["method"] != "POST":
            continue
        if not any((r["path"] or "").startswith(p) for p in _WORK):
            continue
        clients[r["client"] or "?"] = clients.get(r["client"] or "?", 0) + 1
    return {"tokens": 0, "requests": sum(clients.values()), "clients": sorted(clients),
            "source": Said("access log: POST requests from addresses other than {addresses}",
                           {"addresses": ", ".join(sorted(own))})}


def record_runtime_selfreports(store, run_id: int) -> int:
    """One ``ps`` self-report per load, from the first answered sample served by it.

    Ollama states ``size``/``size_vram`` per loaded model; this stores that
    figure beside the card's (principle 5). Loads that already have a
    self-report are left alone. Returns how many rows were written.
    """
    done = 0
    rows = store.db.execute(
        """select s.load_id, s.response_json from samples s
           where s.run_id = ? and s.load_id is not null and s.error_kind is null
             and s.load_id not in (select load_id from memory_selfreports where load_id is not null)
           order by s.id""", [run_id]).fetchall()
    seen: set[int] = set()
    for load_id, raw in rows:
        if load_id in seen:
            continue
        ps = _loads(raw).get("ps")
        if not isinstance(ps, dict) or not ps.get("size"):
            continue
        seen.add(load_id)
        rep = ollama_selfreport({"models": [ps]}, ps.get("name") or ps.get("model"))
        done += store_selfreport(store, run_id, load_id, rep) is not None
    # Ollama's own plan, where its log lines for the load were captured (plan_* facts)
    for (load_id,) in store.db.execute(
            "select distinct f.load_id from facts f join loads l on l.id = f.load_id "
            "where l.run_id = ? and f.name like 'plan_%'", [run_id]).fetchall():
        done += record_plan_selfreport(store, run_id, load_id) is not None
    return done


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _loads(raw) -> dict:
    """A stored JSON object, or {} when the column holds something else (old or damaged rows)."""
    return json_value(raw, dict, {}) if isinstance(raw, str) else {}
