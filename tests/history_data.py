"""Generated multi-run databases for the history tests: known levels, known builds, real SQLite.

The numbers are synthetic on purpose: a step's true size and place must be
known to check that the detection finds it (a real server cannot be made
12 % slower on demand).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.store import dumps, open_store

CAMPAIGN = """[campaign]
name = "{name}"
prompt_classes = ["short"]
reasoning = [false]
repetitions = {reps}
[server]
url = "http://127.0.0.1:8080"
[[models]]
name = "{model}"
{extra}"""


def make_db(path: Path, runs: list[dict], *, name: str = "nightly", model: str = "tiny-a", reps: int = 5,
            extra: str = "", seed: int = 1, classes: tuple[str, ...] = ("short",)) -> list[int]:
    """One run per entry of ``runs``: ``level`` (decode tok/s), ``noise`` (± fraction, uniform), ``build``,
    optional ``status``, ``digest``, ``kv`` (KV cache type K fact), ``values`` (explicit samples),
    ``load`` (load seconds). Every prompt class in ``classes`` gets a cell with its own samples.

    Returns the run ids in order; one day apart.
    """
    rng = random.Random(seed)
    store = open_store(path)
    db = store.db
    text = CAMPAIGN.format(name=name, reps=reps, model=model, extra=extra)
    camp = parse_campaign(text, "n.toml")
    t0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
    cid = db["campaigns"].insert({"name": name, "path": "n.toml", "sha256": camp.sha256, "toml_text": text,
                                  "campaign_json": normalised_text(text),
                                  "registered_at": t0.isoformat()}).last_pk
    ids = []
    for i, spec in enumerate(runs):
        start = (t0 + timedelta(days=i)).isoformat()
        digest = spec.get("digest", "d0")
        mid = db.execute("select id from models where name = ? and digest = ?", [model, digest]).fetchone()
        mid = mid[0] if mid else db["models"].insert({"name": model, "digest": digest, "file_bytes": 10**6,
                                                      "quantisation": "Q4_K_M", "architecture": "llama"}).last_pk
        with db.conn:
            rid = db["runs"].insert({"campaign_id": cid, "host": "h", "gpus_json": dumps({"available": False}),
                                     "backend": "llama-server", "server_url": camp.url,
                                     "server_build": spec.get("build", "b1"), "started_at": start,
                                     "ended_at": start, "status": spec.get("status", "completed"), "exit_code": 0,
                                     "samples_planned": reps, "samples_measured": reps, "samples_failed": 0,
                                     "coverage": 1.0}).last_pk
            load = db["loads"].insert({"run_id": rid, "model_id": mid, "trigger": "explicit", "status": "loaded",
                                       "requested_at": start, "ready_at": start,
                                       "load_seconds": spec.get("load", 2.0) * rng.uniform(0.97, 1.03)}).last_pk
            if spec.get("kv"):
                src = db["log_sources"].insert({"kind": "file", "name": f"log-{rid}"}).last_pk
                line = db["log_lines"].insert({"source_id": src, "run_id": rid, "raw": "kv", "load_id": load}).last_pk
                db["facts"].insert({"load_id": load, "line_id": line, "name": "kv_cache_type_k",
                                    "value_text": spec["kv"]})
            for pos, cls in enumerate(classes):
                cell = db["cells"].insert({"run_id": rid, "model_id": mid, "position": pos, "prompt_class": cls,
                                           "reasoning": 0, "max_tokens": 16, "repetitions": reps, "pinned": 0,
                                           "kind": "measure"}).last_pk
                noise = spec.get("noise", 0.03)
                values = spec.get("values") or [spec["level"] * rng.uniform(1 - noise, 1 + noise) for _ in range(reps)]
                for rep, v in enumerate(values, 1):
                    db["samples"].insert({"run_id": rid, "cell_id": cell, "repetition": rep, "started_at": start,
                                          "prompt_tokens": 40, "generated_tokens": 16, "decode_tps": v,
                                          "prefill_tps": 500 * rng.uniform(0.97, 1.03), "ttft_ms": 80.0,
                                          "counter_source": "timings", "kind": "measure"})
                # a canary sample far off the level: must never enter a series
                db["samples"].insert({"run_id": rid, "cell_id": cell, "repetition": 99, "decode_tps": 1.0,
                                      "kind": "canary"})
        ids.append(rid)
    store.close()
    return ids
