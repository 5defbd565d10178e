"""A generated database shaped like a year of nightly runs, for bench/report_build.py.

Each run carries what a real one does (see the demo's database): per model a
load with its server log block (start lines, tensor and buffer lines, one
``print_timing`` block per request, the unload), the facts parsed from those
lines, measured samples with their gate results, canaries, capability probes
with their exchanges and pass-rule outcomes. Numbers are synthetic; rows go
in with ``executemany`` in one transaction per batch of runs, so 1,000 runs
take seconds, not minutes.
"""

from __future__ import annotations

import hashlib
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cardproof.daemon.campaign.frozen import normalised
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.gates import GATES
from cardproof.daemon.store import dumps, open_store

CAMPAIGN = """[campaign]
name = "{name}"
prompt_classes = ["short", "medium", "long"]
reasoning = [false, true]
repetitions = 5
repetitions_reasoning = 5
[server]
url = "http://127.0.0.1:8080"
{models}
[gates.length_limit]
exclude = false
"""
CLASSES = (("short", 41), ("medium", 1200), ("long", 4800))
PROBES = (("tools", "weather", "NOT_CAPABLE"), ("tools", "currency", "NOT_CAPABLE"),
          ("reasoning", "bat_ball/known", "PASS"), ("reasoning", "bat_ball/changed", "FAIL"),
          ("coding", "is_palindrome", "PASS"), ("thinking", "arithmetic", "DECLARED_NOT_DELIVERED"))


def _columns(db, table: str) -> list[str]:
    return list(db[table].columns_dict)


def _insert(db, table: str, rows: list[dict]) -> None:
    """Rows as dicts, inserted with one executemany (columns the store lacks are left out)."""
    if not rows:
        return
    cols = [c for c in rows[0] if c in _columns(db, table)]
    db.conn.executemany(f"insert into {table} ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                        [[r.get(c) for c in cols] for r in rows])


def _next_id(db, table: str) -> int:
    return (db.execute(f"select max(id) from {table}").fetchone()[0] or 0) + 1


class Generator:
    """Appends runs to one database; ``add(n)`` continues where the last call stopped."""

    def __init__(self, db_path: Path, models: int = 10, campaigns: int = 3, log_lines: int = 3000, seed: int = 7):
        self.path = Path(db_path)
        self.rng = random.Random(seed)
        self.n_models = models
        self.log_lines = log_lines
        store = open_store(self.path)
        db = store.db
        self.names = [f"model-{i:02d}" for i in range(models)]
        self.model_ids = []
        for n in self.names:
            row = next(iter(db.query("select id from models where name = ?", [n])), None)
            self.model_ids.append(row["id"] if row else db["models"].insert(
                {"name": n, "file_bytes": self.rng.randint(2, 30) * 2**30, "digest": n, "quantisation": "Q4_K_M",
                 "architecture": "llama"}).last_pk)
        self.speed = {n: self.rng.uniform(20, 150) for n in self.names}
        self.campaigns = []
        for c in range(campaigns):
            name = f"nightly-{'abc'[c % 3]}{c // 3 or ''}"
            text = CAMPAIGN.format(name=name, models="\n".join(f'[[models]]\nname = "{n}"' for n in self.names))
            camp = parse_campaign(text, f"{name}.toml")
            row = next(iter(db.query("select id from campaigns where name = ?", [name])), None)
            cid = row["id"] if row else db["campaigns"].insert(
                {"name": name, "path": f"{name}.toml", "sha256": camp.sha256, "toml_text": text,
                 "campaign_json": json.dumps(normalised(camp)),
                 "registered_at": "2026-01-01T00:00:00+00:00"}).last_pk
            self.campaigns.append((cid, camp))
        src = next(iter(db.query("select id from log_sources where name = 'bench.log'")), None)
        self.source_id = src["id"] if src else db["log_sources"].insert({"kind": "plain", "name": "bench.log"}).last_pk
        self.runs = db.execute("select count(*) from runs").fetchone()[0]
        store.close()

    def add(self, n: int, progress=None) -> None:
        """Append ``n`` runs, one night per three runs (one per campaign)."""
        store = open_store(self.path)
        db = store.db
        try:
            for done in range(0, n, 25):
                with db.conn:
                    for _ in range(min(25, n - done)):
                        self._run(db)
                if progress:
                    progress(f"generated {self.runs} runs")
        finally:
            store.close()

    def _run(self, db) -> None:
        rng = self.rng
        index = self.runs
        self.runs += 1
        cid, camp = self.campaigns[index % len(self.campaigns)]
        start = datetime(2026, 1, 1, 2, tzinfo=timezone.utc) + timedelta(days=index // len(self.campaigns),
                                                                          minutes=40 * (index % len(self.campaigns)))
        per_model = self.n_models * 30
        rid = db["runs"].insert({
            "campaign_id": cid, "host": "bench", "gpus_json": dumps({"available": False}), "backend": "llama-server",
            "server_url": camp.url, "server_build": f"b{4000 + index // 30}", "started_at": start.isoformat(),
            "ended_at": (start + timedelta(minutes=35)).isoformat(), "status": "completed", "exit_code": 0,
            "samples_planned": per_model, "samples_measured": per_model, "samples_failed": 0, "coverage": 1.0,
        }).last_pk
        ids = {t: _next_id(db, t) for t in ("cells", "samples", "loads", "log_lines", "canaries")}
        cells, samples, gates, loads, lines, facts, probes, rules, observed = [], [], [], [], [], [], [], [], []
        lines_per_request = max(1, (self.log_lines - 60 * self.n_models) // (30 * self.n_models))
        t = start
        for m, (name, mid) in enumerate(zip(self.names, self.model_ids)):
            load_id = ids["loads"] + m
            port = 40000 + rng.randrange(20000)
            first_line = ids["log_lines"] + len(lines)

            def line(text: str, attribution: str = "port") -> int:
                lines.append({"id": ids["log_lines"] + len(lines), "source_id": self.source_id, "run_id": rid,
                              "ts": t.isoformat(), "port": port, "raw": f"[{port}] {text}", "load_id": load_id,
                              "attribution": attribution})
                return lines[-1]["id"]

            for k in range(20):  # start of the model's process: build, system info, metadata
                line(f"0.00.0{k:02d}.000 I llama_model_loader: - kv {k:3d}: general.field_{k} str = value {k}")
            facts.append({"load_id": load_id, "line_id": line("0.00.033.446 I load_tensors:   CPU_Mapped model "
                                                              "buffer size =  5120.00 MiB"),
                          "name": "model_buffer_mib", "device": "CPU", "value_num": 5120.0, "unit": "MiB"})
            facts.append({"load_id": load_id, "line_id": line("0.00.040.918 I llama_context: n_ctx = 8192"),
                          "name": "ctx_size", "value_num": 8192.0, "unit": "tokens"})
            facts.append({"load_id": load_id, "line_id": line("0.00.042.163 I llama_kv_cache: CPU KV buffer size = "
                                                              "1024.00 MiB"),
                          "name": "kv_buffer_mib", "device": "CPU", "value_num": 1024.0, "unit": "MiB"})
            for kind in ("k", "v"):
                facts.append({"load_id": load_id, "line_id": line(f"0.00.043.000 I llama_kv_cache: type_{kind} = f16"),
                              "name": f"kv_cache_type_{kind}", "value_text": "f16"})
            ready = line("0.00.316.177 I srv  llama_server: model loaded")
            load_s = rng.uniform(5, 40)
            loads.append({"id": load_id, "run_id": rid, "model_id": mid, "trigger": "explicit", "status": "loaded",
                          "pid": 1000 + m, "port": port, "requested_at": t.isoformat(),
                          "ready_at": (t + timedelta(seconds=load_s)).isoformat(), "load_seconds": load_s,
                          "model_file": f"/models/{name}.gguf", "model_name": name, "source_id": self.source_id,
                          "start_line_id": first_line, "ready_line_id": ready})
            for reasoning in (0, 1):
                for cls, ptok in CLASSES:
                    cell_id = ids["cells"] + len(cells)
                    cells.append({"id": cell_id, "run_id": rid, "model_id": mid, "position": len(cells),
                                  "prompt_class": cls, "reasoning": reasoning, "max_tokens": 256, "repetitions": 5,
                                  "pinned": 0, "kind": "measure"})
                    for rep in range(1, 6):
                        t += timedelta(seconds=3)
                        sid = ids["samples"] + len(samples)
                        decode = self.speed[name] * rng.uniform(0.95, 1.05)
                        samples.append({
                            "id": sid, "run_id": rid, "cell_id": cell_id, "repetition": rep,
                            "nonce": f"{rng.getrandbits(64):016x}", "started_at": t.isoformat(),
                            "prompt_tokens": ptok, "generated_tokens": 256, "decode_tps": decode,
                            "prefill_tps": rng.uniform(1000, 6000), "prompt_ms": 1000.0, "predicted_ms": 2000.0,
                            "wall_ms": 3100.0, "ttft_ms": rng.uniform(50, 900), "stop_reason": "length",
                            "answer_chars": 900, "reasoning_chars": 1500 * reasoning, "cached_tokens": 0,
                            "counter_source": "timings", "kind": "measure"})
                        gates.extend((sid, g, 0, 0.0, "bench", 0.0) for g in GATES)
                        for k in range(lines_per_request - 3):
                            line(f"0.01.{k:03d}.000 I slot update_slots: id  0 | task {sid} | n_past = {k * 64}")
                        line(f"0.01.000.000 I slot print_timing: id  0 | task {sid} | prompt eval time = "
                             f"1000.00 ms / {ptok} tokens")
                        timing = line(f"0.01.000.001 I        eval time =  2000.00 ms / 256 tokens "
                                      f"({2000 / 256:.2f} ms per token, {decode:.2f} tokens per second)")
                        line(f"0.01.000.002 I slot      release: id  0 | task {sid} | stop processing")
                        observed.append({"source_id": self.source_id, "run_id": rid, "line_id": timing,
                                         "task": sid, "slot": 0, "prompt_tokens": ptok, "prompt_ms": 1000.0,
                                         "generated_tokens": 256, "decode_ms": 2000.0, "ts": t.isoformat()})
            line("0.02.000.000 I srv    operator(): cleaning up before exit...")
            for probe, variant, verdict in PROBES:
                exchange = {"requests": [{"messages": [{"role": "user", "content": f"{probe} {variant} task"}]}],
                            "responses": [{"choices": [{"message": {"role": "assistant",
                                                                    "content": f"answer {rng.random():.6f}"}}]}]}
                probes.append({"run_id": rid, "model_id": mid, "probe": probe, "variant": variant, "attempt": 1,
                               "verdict": verdict, "raw_verdict": verdict, "declared": 0, "graded": 1,
                               "duration_ms": rng.uniform(10, 500),
                               "request_sha256": hashlib.sha256(f"{rid}{mid}{variant}".encode()).hexdigest(),
                               "exchange_json": json.dumps(exchange), "detail_json": "{}", "at": t.isoformat()})
            rules.append({"run_id": rid, "model_id": mid, "rule_name": "candidate",
                          "rule_text": "decode.short >= 50", "rule_sha256": "0" * 64,
                          "campaign_sha256": camp.sha256, "registered_at": start.isoformat(),
                          "evaluated_at": t.isoformat(), "outcome": "pass" if self.speed[name] >= 50 else "fail",
                          "arms_json": json.dumps([{"outcome": "pass", "text": "decode.short >= 50",
                                                    "values": {"decode.short": self.speed[name]}}])})
        canaries = [{"run_id": rid, "gate": g, "result": "not_run", "reason": "bench: no canary", "at": t.isoformat()}
                    for g in GATES]
        for table, rows in (("cells", cells), ("samples", samples), ("loads", loads), ("log_lines", lines),
                            ("facts", facts), ("probe_results", probes), ("rule_results", rules),
                            ("canaries", canaries), ("observed_requests", observed)):
            if table in db.table_names():
                _insert(db, table, rows)
        db.conn.executemany("insert into gate_results (sample_id, gate, fired, observed, observed_text, threshold) "
                            "values (?,?,?,?,?,?)", gates)
