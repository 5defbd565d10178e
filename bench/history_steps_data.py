"""Load and depth steps for generated runs (the history bench and tests): real SQLite rows as
daemon/run/load/ stores them (a cell of kind ``load``/``depth``, its ``load_steps`` row, one sample per
request with ``load_samples`` beside it), with levels a test chooses.

Synthetic on purpose: a step's true size and place must be known to check that the detection finds it.
"""

from __future__ import annotations

import random
from pathlib import Path

from cardproof.daemon.store import open_store

#: streams of the load sweep and depths of the depth sweep each model gets per run
STREAMS = (1, 4)
DEPTHS = (4096,)


def add_steps(path: Path, since_run: int = 0, *, level=None, noise: float = 0.03, requests: int = 8,
              seed: int = 11, rates: tuple = ()) -> None:
    """A load sweep (``STREAMS``) and a depth sweep (``DEPTHS``) for every model of every run after
    the first ``since_run`` runs; with ``rates``, offered request rates too (Poisson steps as
    daemon/run/load/rate.py stores them: axis and cell kind ``rate``, no streams, ``rate_rps``).

    ``level(run_index, model_name, axis, value) -> decode tok/s per request`` (default: 50 / sqrt(streams),
    80 % at depth); each request's decode is that times ``1 ± noise``. ``run_index`` counts from 0.
    """
    rng = random.Random(seed)
    store = open_store(Path(path))
    db = store.db
    try:
        runs = [r[0] for r in db.execute("select id from runs order by started_at, id")][since_run:]
        with db.conn:
            for index, rid in enumerate(runs, since_run):
                started = db.execute("select started_at from runs where id = ?", [rid]).fetchone()[0]
                models = db.execute("select distinct cells.model_id, models.name from cells join models "
                                    "on models.id = cells.model_id where cells.run_id = ? "
                                    "and coalesce(cells.kind, 'measure') = 'measure'", [rid]).fetchall()
                position = db.execute("select coalesce(max(position), -1) + 1 from cells where run_id = ?",
                                      [rid]).fetchone()[0]
                step_pos = 0
                for mid, name in models:
                    for axis, values in (("load", STREAMS), ("depth", DEPTHS), ("rate", rates)):
                        for v in values:
                            base = (level(index, name, axis, v) if level else
                                    50.0 / v ** 0.5 if axis == "load" else 40.0 if axis == "depth" else 45.0)
                            cell = db["cells"].insert({
                                "run_id": rid, "model_id": mid, "position": position, "prompt_class": "short",
                                "reasoning": 0, "max_tokens": 64, "repetitions": requests, "pinned": 0,
                                "kind": axis}).last_pk
                            position += 1
                            wall_s = requests / v if axis == "rate" else 64 / base * requests / (v if axis == "load" else 1)
                            step = db["load_steps"].insert({
                                "run_id": rid, "model_id": mid, "cell_id": cell, "axis": axis,
                                "position": step_pos,
                                "streams": v if axis == "load" else None if axis == "rate" else 1,
                                "rate_rps": v if axis == "rate" else None,
                                "depth_tokens": v if axis == "depth" else None, "requests": requests,
                                "prompt_class": "short", "max_tokens": 64, "total_slots": 4, "n_ctx": 8192,
                                "queueing": 0, "started_at": started, "ended_at": started,
                                "wall_s": wall_s}).last_pk
                            step_pos += 1
                            for rep in range(1, requests + 1):
                                sid = db["samples"].insert({
                                    "run_id": rid, "cell_id": cell, "repetition": rep, "started_at": started,
                                    "prompt_tokens": v if axis == "depth" else 40, "generated_tokens": 64,
                                    "decode_tps": base * rng.uniform(1 - noise, 1 + noise),
                                    "prefill_tps": 900 * rng.uniform(0.97, 1.03),
                                    "ttft_ms": 120 * v ** 0.5 * rng.uniform(0.97, 1.03) if axis != "depth" else 400.0,
                                    "counter_source": "timings", "kind": axis}).last_pk
                                db["load_samples"].insert({"sample_id": sid, "step_id": step,
                                                           "stream": (rep - 1) % v if axis == "load" else 0,
                                                           "queue_ms": 0.0, "chunks": 64})
    finally:
        store.close()
