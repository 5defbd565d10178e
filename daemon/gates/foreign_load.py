"""``foreign_load``: other clients used the server during the cell, so it was not ours alone."""

import json

import httpx

from cardproof.marks import N_
from ..backends import BackendError, evidence
from ..backends.http import tls_verify
from cardproof.daemon.server.prompts import build_prompt
from .base import Canary, Gate, GateOutcome, JudgedRun, Said, SampleContext

FOREIGN_ADDRESS = "127.0.0.2"


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    f = ctx.foreign
    if not f:
        return GateOutcome(None, None, Said("no source for foreign traffic (start llama-server with --metrics)"))
    tokens = f.get("tokens") or 0
    requests = f.get("requests") or 0
    observed = float(max(tokens, requests))
    # the clients (addresses, processes) are evidence: quoted, masked on the page like any address
    clients = ", ".join(str(c) for c in f.get("clients") or [])
    params = {"tokens": tokens, "requests": requests, "clients": clients, "source": f.get("source")}
    text = (Said("tokens generated for others: {tokens}, foreign requests: {requests}, from {clients} ({source})",
                 params) if clients
            else Said("tokens generated for others: {tokens}, foreign requests: {requests} ({source})", params))
    return GateOutcome(observed > threshold, observed, text)


def from_metrics(store, cell_id: int) -> dict | None:
    """Tokens the server generated during the cell beyond our own samples (``/metrics`` before and after)."""
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
    counts = {"generated": int(delta), "ours": ours}
    said = (Said("/metrics tokens_predicted_total: {generated} generated, {ours} ours; NVML: other GPU processes", counts)
            if procs else Said("/metrics tokens_predicted_total: {generated} generated, {ours} ours", counts))
    return {"tokens": max(0, int(delta - ours)), "requests": len(procs), "clients": procs, "source": said}


def _foreign_gpu_processes(store, cell_id: int, ts_from: str, ts_to: str) -> list[str]:
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


def gather(judged: JudgedRun):
    """Foreign traffic per cell: the server's counters, else (Ollama, generic servers) the access log."""
    per_cell: dict[int, dict | None] = {}

    def per_sample(sample: dict, response: dict) -> dict:
        cell_id = sample["cell_id"]
        if cell_id not in per_cell:
            per_cell[cell_id] = from_metrics(judged.store, cell_id) or evidence.foreign_from_access_log(
                judged.store, cell_id)
        return {"foreign": per_cell[cell_id]}

    return per_sample


def provoke(run) -> None:
    # a second client from another loopback address, inside the cell
    cid = run.new_cell("foreign_load")
    run.snapshot(cid, "before")
    _, t = run.sample("foreign_load", cell_id=cid)
    foreign_error = None
    try:
        with httpx.Client(base_url=run.backend.url, transport=httpx.HTTPTransport(local_address=FOREIGN_ADDRESS,
                                                                         verify=tls_verify(run.backend.url)),
                          timeout=60) as other:
            run.backend.chat(run.model, build_prompt(run.short_tokens, "f0re1gn0f0re1gn0"), max_tokens=16,
                             reasoning=False, client=other)
    except (BackendError, httpx.HTTPError, OSError) as exc:
        foreign_error = str(exc)
    run.snapshot(cid, "after")
    if foreign_error:
        run.plan("foreign_load", sample_id=t.sample_id, result="not_run",
                 reason=Said("second client from {address} failed: {error}",
                             {"address": FOREIGN_ADDRESS, "error": foreign_error}))
    else:
        run.plan("foreign_load", sample_id=t.sample_id, detail={"foreign_client": FOREIGN_ADDRESS})


GATE = Gate(
    "foreign_load",
    N_("other clients used the server during the cell"),
    check,
    threshold_unit=N_("tokens or requests"),
    order=60,
    canary=Canary(provoke, order=50),
    gather=gather,
)
