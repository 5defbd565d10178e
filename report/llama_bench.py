"""Read-only query for the llama-bench section: imported in-process results with their configuration.

``llama_bench_view(db)`` is everything ``sections/llama_bench.md.j2`` needs
(template variable ``llama_bench``). Rows keep llama-bench's own test names
(``pp16``, ``tg8``) and spread over the raw ``samples_ts``; each row points at
a configuration (build, backend, GPU layers, cache types, threads, batch
sizes, host), because a number without its conditions is not comparable
(principle 13). These figures never enter the server tables: llama-bench
runs inside one process, without HTTP, chat template or server scheduling.
"""

from __future__ import annotations

import json
from pathlib import PurePath

from .stats import spread

#: configuration fields shown per configuration, in order
CONFIG_FIELDS = ("build", "backends", "device", "n_gpu_layers", "n_threads", "batch", "kv_types", "flash_attn",
                 "split_mode", "host")


def _config(r: dict) -> dict:
    build = r["build_commit"] or "?"
    if r.get("build_number"):
        build += f" ({r['build_number']})"
    return {
        "build": build,
        "backends": r["backends"],
        "device": r["gpu_info"] or r["cpu_info"],
        "n_gpu_layers": r["n_gpu_layers"],
        "n_threads": r["n_threads"],
        "batch": f"{r['n_batch']}/{r['n_ubatch']}",
        "n_batch": r["n_batch"], "n_ubatch": r["n_ubatch"],  # the page prints them with the locale's separator
        "kv_types": f"{r['type_k']}/{r['type_v']}",
        "flash_attn": r["flash_attn"],
        "split_mode": r["split_mode"],
        "host": r["host"],
    }


def llama_bench_view(db, model_names: list[str] | None = None) -> dict:
    """Imported llama-bench results, optionally only those whose file name contains one of ``model_names``."""
    if "llama_bench_results" not in db.table_names():
        return {"available": False, "rows": [], "configs": [], "imports": 0}
    rows = list(db.query(
        """select r.*, i.host, i.path as import_path, i.imported_at from llama_bench_results r
           join llama_bench_imports i on i.id = r.import_id order by r.model_filename, r.import_id, r.row_index"""))
    if model_names:
        rows = [r for r in rows if any(n in PurePath(r["model_filename"] or "").name for n in model_names)]
    configs: list[dict] = []
    keys: list[str] = []
    out = []
    for r in rows:
        cfg = _config(r)
        key = json.dumps(cfg, sort_keys=True)
        if key not in keys:
            keys.append(key)
            configs.append(cfg | {"label": f"C{len(keys)}"})
        s = spread(json.loads(r["samples_ts_json"] or "[]"))
        out.append({
            "id": r["id"],
            "model": PurePath(r["model_filename"] or "?").name,
            "model_type": r["model_type"],
            "model_bytes": r["model_size"],
            "test": r["test"],
            "tps": s,
            "avg_ts": r["avg_ts"],
            "stddev_ts": r["stddev_ts"],
            "config": configs[keys.index(key)]["label"],
            "test_time": r["test_time"],
        })
    imports = len({r["import_id"] for r in rows})
    return {"available": bool(out), "rows": out, "configs": configs, "imports": imports,
            "config_fields": CONFIG_FIELDS}
