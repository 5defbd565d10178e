"""Is the report step cheap next to mkdocs? And are unchanged runs skipped?

Generates a database of RUNS runs x MODELS models x 6 cells x 5 samples
(synthetic numbers: this measures rendering, not a server), then times in
one go: the report step (queries, caveats, charts, Markdown in two
languages), the `mkdocs build --strict` that follows, and a second report
step with nothing changed (the incremental build). Prints the times and the
ratio report / mkdocs (goal <= 0.5) and the whole build (goal < 120 s).

    python bench/report_build.py [--runs 100] [--models 10]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.gates import GATES
from cardproof.daemon.store import dumps, open_store
from cardproof.report.build import mkdocs_build, scaffold, write_articles

CAMPAIGN = """[campaign]
name = "bench"
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


def generate(db_path: Path, runs: int, models: int) -> None:
    rng = random.Random(7)
    store = open_store(db_path)
    db = store.db
    names = [f"model-{i:02d}" for i in range(models)]
    text = CAMPAIGN.format(models="\n".join(f'[[models]]\nname = "{n}"' for n in names))
    camp = parse_campaign(text, "bench.toml")
    model_ids = [db["models"].insert({"name": n, "file_bytes": rng.randint(2, 30) * 2**30, "digest": n,
                                      "quantisation": "Q4_K_M", "architecture": "llama"}).last_pk for n in names]
    base_speed = {n: rng.uniform(20, 150) for n in names}
    t0 = datetime(2026, 9, 1, tzinfo=timezone.utc)
    for r in range(runs):
        start = t0 + timedelta(days=r)
        with db.conn:
            cid = db["campaigns"].insert({"name": "bench", "path": "bench.toml", "sha256": camp.sha256,
                                          "toml_text": text, "registered_at": start.isoformat()}).last_pk
            rid = db["runs"].insert({"campaign_id": cid, "host": "bench", "gpus_json": dumps({"available": False}),
                                     "backend": "llama-server", "server_url": camp.url, "server_build": "b1",
                                     "started_at": start.isoformat(), "ended_at": start.isoformat(),
                                     "status": "completed", "exit_code": 0, "samples_planned": models * 30,
                                     "samples_measured": models * 30, "samples_failed": 0, "coverage": 1.0}).last_pk
            sample_rows, gate_rows = [], []
            pos = 0
            for name, mid in zip(names, model_ids):
                db["loads"].insert({"run_id": rid, "model_id": mid, "trigger": "explicit", "status": "loaded",
                                    "requested_at": start.isoformat(), "ready_at": start.isoformat(),
                                    "load_seconds": rng.uniform(5, 40)})
                for reasoning in (0, 1):
                    for cls, ptok in (("short", 41), ("medium", 1200), ("long", 4800)):
                        cell = db["cells"].insert({"run_id": rid, "model_id": mid, "position": pos,
                                                   "prompt_class": cls, "reasoning": reasoning, "max_tokens": 256,
                                                   "repetitions": 5, "pinned": 0, "kind": "measure"}).last_pk
                        pos += 1
                        for rep in range(1, 6):
                            sample_rows.append((rid, cell, rep, f"{rng.getrandbits(64):016x}", start.isoformat(),
                                                ptok, 256, base_speed[name] * rng.uniform(0.95, 1.05),
                                                rng.uniform(1000, 6000), 1000.0, 2000.0, 3100.0, "length", 900,
                                                1500 * reasoning, 0, "timings", "measure"))
            db.conn.executemany(
                "insert into samples (run_id, cell_id, repetition, nonce, started_at, prompt_tokens, "
                "generated_tokens, decode_tps, prefill_tps, prompt_ms, predicted_ms, wall_ms, stop_reason, "
                "answer_chars, reasoning_chars, cached_tokens, counter_source, kind) "
                "values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", sample_rows)
            ids = [row[0] for row in db.execute("select id from samples where run_id = ?", [rid])]
            for sid in ids:
                for g in GATES:
                    gate_rows.append((sid, g, 1 if g in ("length_limit", "not_on_card") else 0, 0.0, "bench", 0.0))
            db.conn.executemany("insert into gate_results (sample_id, gate, fired, observed, observed_text, "
                                "threshold) values (?,?,?,?,?,?)", gate_rows)
        if (r + 1) % 10 == 0:
            print(f"generated {r + 1}/{runs} runs", file=sys.stderr)
    store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--models", type=int, default=10)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cardproof-report-bench-"))
    db = work / "bench.db"
    generate(db, args.runs, args.models)
    project = work / "proj"
    scaffold(project)
    t = time.perf_counter()
    written = write_articles(db, project, progress=lambda s: print(s, file=sys.stderr) if s.startswith("[1") else None)
    report_s = time.perf_counter() - t
    t = time.perf_counter()
    mkdocs_build(project)
    mkdocs_s = time.perf_counter() - t
    t = time.perf_counter()
    again = write_articles(db, project)
    incremental_s = time.perf_counter() - t
    print(f"database: {args.runs} runs x {args.models} models x 6 cells x 5 samples")
    print(f"report step (queries, caveats, charts, Markdown en+de): {report_s:.1f} s, {len(written)} files")
    print(f"mkdocs build --strict: {mkdocs_s:.1f} s")
    print(f"ratio report/mkdocs: {report_s / mkdocs_s:.2f} (goal <= 0.5)")
    print(f"whole build: {report_s + mkdocs_s:.1f} s (goal < 120 s)")
    print(f"second report step, nothing changed: {incremental_s:.1f} s, {len(again)} files rewritten (index pages only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
