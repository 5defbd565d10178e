"""Judge a run: every sample through every gate, then each canary's verdict.

Runs after the measurements (and after log capture), so gates see the load
facts attributed to each sample's load. Re-judging replaces earlier results.
"""

from __future__ import annotations

import json
import re

from .backends import evidence
from .gates import GATES, GateConfig, SampleContext, evaluate
from .store import Store

_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def _facts(store: Store, load_id: int | None) -> dict:
    if not load_id or "facts" not in store.db.table_names():
        return {}
    out: dict = {}
    for f in store.db.query("select name, device, value_num, value_text from facts where load_id = ? order by id", [load_id]):
        value = f["value_num"] if f["value_num"] is not None else f["value_text"]
        if f["device"]:
            out.setdefault(f["name"], {})[f["device"]] = value
        else:
            out[f["name"]] = value
    return out


def _foreign(store: Store, cell_id: int) -> dict | None:
    checks = {c["phase"]: c for c in store.db.query(
        "select * from cell_checks where cell_id = ? and \"check\" = 'metrics'", [cell_id])}
    before, after = checks.get("before"), checks.get("after")
    if not before or not after or not before["ok"] or not after["ok"]:
        return None
    b, a = json.loads(before["value_json"]), json.loads(after["value_json"])
    if "tokens_predicted_total" not in a or "tokens_predicted_total" not in b:
        return None
    delta = a["tokens_predicted_total"] - b["tokens_predicted_total"]
    rows = list(store.db.query("select generated_tokens, error_kind from samples where cell_id = ?", [cell_id]))
    if delta < 0 or any(r["error_kind"] for r in rows):
        return None  # counters reset (reload) or a request broke off mid-way: not comparable
    ours = sum(r["generated_tokens"] or 0 for r in rows)
    procs = _foreign_gpu_processes(store, cell_id, before["at"], after["at"])
    return {"tokens": max(0, int(delta - ours)), "requests": len(procs), "clients": procs,
            "source": f"/metrics tokens_predicted_total: {int(delta)} generated, {ours} ours"
                      + ("; NVML: other GPU processes" if procs else "")}


def _foreign_gpu_processes(store: Store, cell_id: int, ts_from: str, ts_to: str) -> list[str]:
    """Processes NVML saw on the cards during the cell that are no load of this run."""
    if "memory_load_pids" not in store.db.table_names():
        return []
    run_id = store.db["cells"].get(cell_id)["run_id"]
    rows = store.db.query(
        """select distinct pid, process_name from memory_samples
           where scope = 'process' and ts >= ? and ts <= ? and pid is not null
             and pid not in (select pid from memory_load_pids where load_id in
                             (select id from loads where run_id = ?))""",
        [ts_from, ts_to, run_id],
    )
    return [f"pid {r['pid']} ({r['process_name'] or '?'})" for r in rows]


def _contexts(store: Store, run: dict, campaign_text: str):
    gpus = json.loads(run["gpus_json"] or "{}")
    cells = {c["id"]: c for c in store.db.query("select * from cells where run_id = ?", [run["id"]])}
    embed = {}
    for c in store.db.query(
        "select cell_checks.* from cell_checks join cells on cells.id = cell_id where cells.run_id = ? "
        "and \"check\" = 'embedding' order by cell_checks.id", [run["id"]]):
        v = json.loads(c["value_json"] or "{}")
        embed.setdefault(c["cell_id"], []).append({"phase": c["phase"], "ok": bool(c["ok"]), "error": c["error_text"],
                                                  "url": v.get("url")})
    configured = "[embedding]" in campaign_text
    foreign_cache: dict[int, dict | None] = {}
    inside = {ld["sample_id"]: ld["load_seconds"] for ld in store.db.query(
        "select sample_id, load_seconds from loads where run_id = ? and trigger = 'inside_request'", [run["id"]])}
    for s in store.db.query("select * from samples where run_id = ? and error_kind is null order by id", [run["id"]]):
        cell = cells[s["cell_id"]]
        if s["cell_id"] not in foreign_cache:
            # no /metrics (Ollama, generic servers): the access log, where it was captured
            foreign_cache[s["cell_id"]] = _foreign(store, s["cell_id"]) or evidence.foreign_from_access_log(
                store, s["cell_id"])
        response = json.loads(s["response_json"] or "{}")
        yield s, SampleContext(
            sample=s,
            response=response,
            load_duration_seconds=evidence.load_duration_seconds(response),
            gpu_share=evidence.gpu_share(response),
            max_tokens=cell["max_tokens"],
            load_inside_seconds=inside.get(s["id"]),
            facts=_facts(store, s["load_id"]),
            gpu_available=bool(gpus.get("available")),
            gpu_reason=gpus.get("reason"),
            embedding=embed.get(s["cell_id"], []),
            embedding_configured=configured or s["cell_id"] in embed,
            foreign=foreign_cache[s["cell_id"]],
        )


def judge_run(store: Store, run_id: int, gates: dict[str, GateConfig]) -> dict:
    """Write gate_results for every answered sample of the run; settle canary verdicts."""
    run = store.db["runs"].get(run_id)
    text = store.db["campaigns"].get(run["campaign_id"])["toml_text"]
    rows = []
    for s, ctx in _contexts(store, run, text):
        for r in evaluate(ctx, gates):
            r["sample_id"] = s["id"]
            rows.append(r)
    with store.db.conn:
        store.db.execute(
            "delete from gate_results where sample_id in (select id from samples where run_id = ?)", [run_id])
        if rows:
            store.db["gate_results"].insert_all(rows)
    _settle_canaries(store, run_id, gates)
    fired = {}
    for r in rows:
        if r["fired"]:
            fired[r["gate"]] = fired.get(r["gate"], 0) + 1
    return fired


def _settle_canaries(store: Store, run_id: int, gates: dict[str, GateConfig]) -> None:
    for c in list(store.db.query("select * from canaries where run_id = ?", [run_id])):
        if c["result"] == "not_run":
            continue
        if c["sample_id"] is None:
            result, reason = _recorded(c, gates)
        else:
            sample = store.db["samples"].get(c["sample_id"])
            if sample["error_kind"]:
                result, reason = "not_fired", f"the canary request failed: {sample['error_text'][:200]}"
            else:
                g = next(store.db.query("select * from gate_results where sample_id = ? and gate = ?",
                                        [c["sample_id"], c["gate"]]), None)
                if g is None or g["fired"] is None:
                    result = "not_fired"
                    reason = (g or {}).get("error_text") or (g or {}).get("observed_text") or "no gate result"
                else:
                    result = "fired" if g["fired"] else "not_fired"
                    reason = g["observed_text"]
        if c["sample_id"] is None and c["reason"]:
            reason = f"{c['reason']}; {reason}"
        store.update("canaries", c["id"], {"result": result, "reason": reason})


def _recorded(canary: dict, gates: dict[str, GateConfig]) -> tuple[str, str]:
    detail = json.loads(canary["detail_json"] or "{}")
    line = detail.get("recorded_line", "")
    m = _OFFLOADED.search(line)
    if not m:
        return "not_fired", "recorded line not readable"
    ctx = SampleContext(sample={}, response={}, max_tokens=0,
                        facts={"offloaded_layers": int(m[1]), "total_layers": int(m[2])}, gpu_available=True)
    cfg = gates.get(canary["gate"])
    out = GATES[canary["gate"]].check(ctx, cfg.threshold if cfg else 0.0)
    return ("recorded" if out.fired else "not_fired"), f"{out.observed_text} (recorded)"
