"""Generated runs for the finding rules: real SQLite stores written as the runner writes them, known numbers.

The numbers are synthetic on purpose: a rule must be seen to fire where the
data carries its statement and to stay silent where it does not, and a real
server cannot be made a mixture of experts on demand. ``SEED_NINE`` is a run
in the shape of the first seed write-up: dense and mixture-of-experts models
of 20 to 36 B parameters, with shapes as their GGUF headers state them, and
a mixed ladder (Q4_K_M and Q8_0 of different base models).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.daemon.store import dumps, open_store

GIB = 2**30


@dataclass
class M:
    """One model of a generated run: its shape (the models row) and what its samples say."""

    name: str
    shape: dict = field(default_factory=dict)
    decode: float = 50.0  # tok/s of the first class; other classes a little slower
    prefill: float = 2000.0
    noise: float = 0.02  # ± fraction, uniform
    values: list[float] | None = None  # the decode samples as given (the first class's; others a little slower)
    load_s: list[float] = field(default_factory=lambda: [3.0])  # measured loads (a second and later: inside a request)
    wall_s: float = 2.0  # each answered request's wall time
    pinned: bool = False
    card_mib: float | None = None
    depth: list[tuple[int, int, float]] = field(default_factory=list)  # (depth asked, prompt tokens, decode)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (error_kind, error_text) in the first class
    crashes: list[str] = field(default_factory=list)  # end_reason of a crashed load, one per error above
    # (peak RSS, weights, KV cache, context) of the first load: the server process read on the host and
    # the buffer lines of its log, as a CPU-only run stores them
    host: tuple[float, float, float, int] | None = None


def shape(arch: str, quant: str, params: float, *, bits: float, basename: str, tokenizer: str,
          experts: tuple[int, int] = (0, 0), active: float | None = None) -> dict:
    """A models row's shape as daemon/modelfile.gguf_header gives it (``params`` in billions)."""
    n = int(params * 1e9)
    return {"architecture": arch, "quantisation": quant, "params": n, "file_bytes": int(n * bits / 8),
            "expert_count": experts[0], "expert_used_count": experts[1],
            "active_params": int((active or params) * 1e9), "basename": basename,
            "tokenizer_sha256": hashlib.sha256(tokenizer.encode()).hexdigest()}


#: the first seed's shape: three mixture-of-experts files (one base at Q4_K_M and Q8_0), six dense ones;
#: "Qwen3" and "Mistral-Small" each hold files of different base models at different quantisations
SEED_NINE = [
    M("qwen3-30b-a3b:q4_k_m", shape("qwen3moe", "Q4_K_M", 30.53, bits=4.9, basename="Qwen3", tokenizer="qwen3",
                                     experts=(128, 8), active=3.35), decode=151.0, prefill=2900.0),
    M("qwen3-30b-a3b:q8_0", shape("qwen3moe", "Q8_0", 30.53, bits=8.5, basename="Qwen3", tokenizer="qwen3",
                                   experts=(128, 8), active=3.35), decode=118.0, prefill=3100.0),
    M("gpt-oss-20b:mxfp4", shape("gpt-oss", "MXFP4", 20.91, bits=4.3, basename="gpt-oss", tokenizer="o200k",
                                  experts=(32, 4), active=3.61), decode=139.0, prefill=3400.0),
    M("qwen3-32b:q4_k_m", shape("qwen3", "Q4_K_M", 32.76, bits=4.9, basename="Qwen3", tokenizer="qwen3"),
      decode=38.0, prefill=1100.0),
    M("gemma-3-27b:q4_k_m", shape("gemma3", "Q4_K_M", 27.01, bits=4.9, basename="gemma-3", tokenizer="gemma3"),
      decode=41.0, prefill=1300.0),
    M("seed-oss-36b:q4_k_m", shape("seed_oss", "Q4_K_M", 36.15, bits=4.9, basename="Seed-OSS", tokenizer="seed"),
      decode=33.0, prefill=950.0),
    M("mistral-small-24b:q4_k_m", shape("llama", "Q4_K_M", 23.57, bits=4.9, basename="Mistral-Small",
                                         tokenizer="tekken"), decode=52.0, prefill=1700.0),
    M("mistral-small-22b:q8_0", shape("llama", "Q8_0", 22.25, bits=8.5, basename="Mistral-Small",
                                       tokenizer="mistral-v3"), decode=31.0, prefill=1500.0),
    M("llama-3.3-70b:q2_k", shape("llama", "Q2_K", 70.55, bits=2.9, basename="Llama-3.3", tokenizer="llama3"),
      decode=22.0, prefill=600.0),
]

CLASSES = {"short": 40, "long": 4000}


def campaign_text(models: list[M], extra: str = "") -> str:
    rows = "\n".join(f'[[models]]\nname = "{m.name}"\n' + (f'requantized_from = "{m.shape["requantized_from"]}"\n'
                                                          if m.shape.get("requantized_from") else "")
                     for m in models)
    return (f'[campaign]\nname = "findings"\nprompt_classes = {list(CLASSES)!r}\nreasoning = [false]\n'
            f'repetitions = 5\n[server]\nurl = "http://127.0.0.1:8080"\n{rows}{extra}').replace("'", '"')


def make_run(path: Path, models: list[M], *, reps: int = 5, status: str = "completed", card_total_mib=None,
             fit: dict | None = None, extra: str = "", seed: int = 1) -> int:
    """One run of ``models`` in a new store at ``path``; returns its id.

    ``card_total_mib``: the cards' total as the sampler read it (NVML); a model's ``card_mib`` is then its
    steady state after load. ``fit``: model name -> [(context, verdict)] rows of the fit test.
    """
    rng = random.Random(seed)
    store = open_store(path)
    db = store.db
    text = campaign_text(models, extra)
    t0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
    with db.conn:
        cid = db["campaigns"].insert({"name": "findings", "path": "f.toml", "toml_text": text,
                                      "campaign_json": normalised_text(text),
                                      "sha256": hashlib.sha256(text.encode()).hexdigest(),
                                      "registered_at": t0.isoformat()}).last_pk
        planned = len(models) * len(CLASSES) * reps
        rid = db["runs"].insert({"campaign_id": cid, "host": "h", "gpus_json": dumps({"available": False}),
                                 "backend": "llama-server", "server_url": "http://127.0.0.1:8080",
                                 "server_build": "b1", "started_at": t0.isoformat(), "ended_at": t0.isoformat(),
                                 "status": status, "exit_code": 0, "samples_planned": planned,
                                 "samples_measured": planned, "samples_failed": 0, "coverage": 1.0}).last_pk
        t = t0
        position = 0
        for m in models:
            row = {"name": m.name, "digest": hashlib.sha256(m.name.encode()).hexdigest()[:16],
                   **{k: v for k, v in m.shape.items() if k != "requantized_from"}}
            mid = db["models"].insert(row).last_pk
            first_load = None
            start = t
            for i, seconds in enumerate(m.load_s):
                t += timedelta(seconds=seconds + 1)
                load = db["loads"].insert({
                    "run_id": rid, "model_id": mid, "trigger": "explicit" if i == 0 else "inside_request",
                    "requested_at": (t - timedelta(seconds=seconds)).isoformat(), "ready_at": t.isoformat(),
                    "load_seconds": seconds, "status": "loaded", "pid": 1000 + mid,
                    "end_reason": m.crashes[i - 1] if 0 < i <= len(m.crashes) else None}).last_pk
                first_load = first_load or load
            for n, (cls, tokens) in enumerate(CLASSES.items()):
                cell = db["cells"].insert({"run_id": rid, "model_id": mid, "position": position, "prompt_class": cls,
                                           "reasoning": 0, "max_tokens": 256, "repetitions": reps,
                                           "pinned": int(m.pinned), "kind": "measure"}).last_pk
                position += 1
                if m.host is not None:  # the server process read during the cell: the first class at the peak
                    db["host_memory_cells"].insert({"run_id": rid, "load_id": first_load, "cell_id": cell,
                                                    "status": "ok", "n_samples": 2,
                                                    "peak_rss_mib": m.host[0] * (1 + 0.05 * n)})
                level = m.decode * (1 - 0.1 * n)
                values = [v * (1 - 0.1 * n) for v in m.values] if m.values else \
                    [level * rng.uniform(1 - m.noise, 1 + m.noise) for _ in range(reps)]
                for rep, v in enumerate(values, 1):
                    t += timedelta(seconds=m.wall_s)
                    prefill = m.prefill * rng.uniform(1 - m.noise, 1 + m.noise)
                    db["samples"].insert({
                        "run_id": rid, "cell_id": cell, "repetition": rep, "started_at": t.isoformat(),
                        "prompt_tokens": tokens, "generated_tokens": 256, "decode_tps": v,
                        "prefill_tps": prefill,
                        # the first token comes once the prompt is read, and a little after
                        "ttft_ms": 20.0 + tokens / prefill * 1000, "wall_ms": m.wall_s * 1000 * rng.uniform(0.98, 1.02),
                        "counter_source": "timings", "kind": "measure"})
                if n == 0:
                    for k, (kind, err) in enumerate(m.errors, len(values) + 1):
                        t += timedelta(seconds=1)
                        db["samples"].insert({"run_id": rid, "cell_id": cell, "repetition": k,
                                              "started_at": t.isoformat(), "error_kind": kind, "error_text": err,
                                              "kind": "measure"})
            for pos, (depth, tokens, level) in enumerate(m.depth):
                cell = db["cells"].insert({"run_id": rid, "model_id": mid, "position": position,
                                           "prompt_class": f"depth-{depth}", "reasoning": 0, "max_tokens": 64,
                                           "repetitions": reps, "pinned": int(m.pinned), "kind": "depth"}).last_pk
                position += 1
                db["load_steps"].insert({"run_id": rid, "model_id": mid, "cell_id": cell, "axis": "depth",
                                         "position": pos, "streams": 1, "depth_tokens": depth, "requests": reps,
                                         "prompt_class": "short", "max_tokens": 64, "wall_s": 10.0})
                for rep in range(reps):
                    db["samples"].insert({"run_id": rid, "cell_id": cell, "repetition": rep + 1,
                                          "prompt_tokens": tokens, "generated_tokens": 64,
                                          "decode_tps": level * rng.uniform(1 - m.noise, 1 + m.noise),
                                          "prefill_tps": 1000.0, "ttft_ms": 90.0, "wall_ms": 1000.0,
                                          "counter_source": "timings", "kind": "depth"})
            db.execute("update loads set ended_at = ? where run_id = ? and model_id = ? and ended_at is null",
                       [t.isoformat(), rid, mid])
            # a reload happened inside a measured request (how report.queries.is_measured_load knows it)
            db.execute("update loads set sample_id = (select min(s.id) from samples s join cells c on c.id = s.cell_id "
                       "where c.run_id = ? and c.model_id = ?) where run_id = ? and model_id = ? "
                       "and trigger = 'inside_request'", [rid, mid, rid, mid])
            if m.card_mib is not None and card_total_mib:
                db["memory_load_stats"].insert({"run_id": rid, "load_id": first_load, "kind": "after_load",
                                                "ts_from": start.isoformat(), "ts_to": t.isoformat(),
                                                "status": "steady", "total_mib": m.card_mib,
                                                "peak_mib": m.card_mib, "median_mib": m.card_mib, "n_ticks": 5,
                                                "per_device_json": dumps({"0": m.card_mib})})
                db["memory_samples"].insert({"run_id": rid, "load_id": first_load, "ts": start.isoformat(),
                                             "scope": "device", "device_index": 0, "used_mib": m.card_mib,
                                             "total_mib": card_total_mib, "free_mib": card_total_mib - m.card_mib,
                                             "source": "nvml", "device_name": "NVIDIA GeForce RTX 4090"})
            if m.host is not None:
                _host_memory(db, rid, first_load, m.host, start)
            for pos, (context, verdict) in enumerate((fit or {}).get(m.name, [])):
                db["fit_checks"].insert({"run_id": rid, "model_id": mid, "position": pos, "context_tokens": context,
                                         "ctx_size": context, "verdict": verdict, "request_ok": int(verdict == "fits"),
                                         "evidence_json": "{}"})
            t += timedelta(seconds=5)
    store.close()
    return rid


def _host_memory(db, rid: int, load_id: int, host: tuple, start) -> None:
    """The load's server process read twice on the host, and its log's weights, KV cache and context lines."""
    peak, weights, kv, ctx = host
    for k, rss in enumerate((peak * 0.9, peak)):
        db["host_memory_samples"].insert({"run_id": rid, "load_id": load_id, "pid": 2000 + load_id,
                                          "ts": (start + timedelta(seconds=k)).isoformat(), "rss_mib": rss,
                                          "anon_mib": rss - weights, "file_mib": weights, "source": "psutil"})
    src = db["log_sources"].insert({"kind": "plain", "name": f"server-{load_id}.log"}).last_pk
    for raw, name, device, value in (
            (f"load_tensors:   CPU_Mapped model buffer size = {weights:8.2f} MiB", "model_buffer_mib", "CPU_Mapped",
             weights),
            (f"llama_kv_cache:        CPU KV buffer size = {kv:8.2f} MiB", "kv_buffer_mib", "CPU", kv),
            (f"llama_context: n_ctx         = {ctx}", "ctx_size", None, float(ctx))):
        line = db["log_lines"].insert({"source_id": src, "run_id": rid, "raw": raw, "load_id": load_id,
                                       "attribution": "pid"}).last_pk
        db["facts"].insert({"load_id": load_id, "line_id": line, "name": name, "device": device,
                            "value_num": value, "unit": "MiB" if name.endswith("_mib") else None})


def view_of(path: Path, run_id: int) -> dict:
    """The run view a finding rule reads: ``queries.run_view`` with what ``findings.inputs`` adds."""
    from cardproof.report import queries
    from cardproof.report.findings.inputs import gather

    store = open_store(path, mode="ro")
    try:
        view = queries.run_view(store.db, run_id)
        return view | gather(store.db, view)
    finally:
        store.close()
