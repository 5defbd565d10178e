"""What a run measured under: the conditions each trend point carries, and what changed between two.

Run-level conditions come from the run row (server build, backend, GPUs and
driver where NVML saw them, campaign hash); model-level ones from the model
row (quantisation, file digest) and from the facts parsed from the load's
log lines (context, KV cache types, offload, speculative decoding, draft
model). A condition that was not stored is absent, never guessed: a run
without log lines says nothing about its KV cache types, and "absent" next
to "q8_0" is not reported as a change.
"""

from __future__ import annotations

import json

#: run-level conditions, in the order the page lists them
RUN_CONDITIONS = ("server build", "backend", "GPUs", "driver", "CUDA", "host", "campaign file")
#: load facts that change what a model measures (daemon/logs/parsers), by the label the page shows
FACT_CONDITIONS = {
    "ctx_size": "context",
    "kv_cache_type_k": "KV cache type K",
    "kv_cache_type_v": "KV cache type V",
    "offloaded_layers": "offloaded layers",
    "spec_type": "speculative decoding",
    "draft_model": "draft model",
}
MODEL_CONDITIONS = ("quantisation", "file digest", *FACT_CONDITIONS.values())


def _gpu_conditions(raw: str | None) -> dict:
    try:
        data = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    out = {}
    gpus = data.get("gpus") if isinstance(data.get("gpus"), list) else []
    names = [str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")]
    if data.get("available") is False:
        out["GPUs"] = "none (CPU only)"
    elif names:
        out["GPUs"] = ", ".join(names)
    if data.get("driver"):
        out["driver"] = str(data["driver"])
    cuda = data.get("cuda_version") or data.get("cuda")
    if cuda:
        out["CUDA"] = str(cuda)
    return out


def run_conditions(run: dict) -> dict[str, str]:
    """Run-level conditions of a run row (as ``queries.runs`` returns it); missing ones are left out."""
    out = {}
    if run.get("server_build"):
        out["server build"] = str(run["server_build"])
    if run.get("backend"):
        out["backend"] = str(run["backend"])
    out |= _gpu_conditions(run.get("gpus_json"))
    if run.get("host"):
        out["host"] = str(run["host"])
    if run.get("campaign_sha256"):
        out["campaign file"] = str(run["campaign_sha256"])[:12]
    return out


def _fact_text(num, text) -> str | None:
    if text not in (None, ""):
        return str(text)
    if isinstance(num, (int, float)) and not isinstance(num, bool):
        return str(int(num)) if float(num).is_integer() else str(num)
    return None


def model_conditions(db, run_ids: list[int] | None = None) -> dict[tuple[int, str], dict[str, str]]:
    """(run id, model name) -> model-level conditions, from two queries over the whole store (or ``run_ids``).

    Where a run loaded a model more than once with different facts, the
    values are joined ("q8_0 / f16"): both held during the run.
    """
    out: dict[tuple[int, str], dict[str, set]] = {}
    for r in db.query(
            """select distinct cells.run_id, models.name, models.quantisation, models.digest
               from cells join models on models.id = cells.model_id
               where coalesce(cells.kind, 'measure') = 'measure'""" + _among("cells.run_id", run_ids)):
        entry = out.setdefault((r["run_id"], r["name"]), {})
        if r["quantisation"]:
            entry.setdefault("quantisation", set()).add(str(r["quantisation"]))
        if r["digest"]:
            entry.setdefault("file digest", set()).add(str(r["digest"])[:12])
    if "facts" in db.table_names():
        names = list(FACT_CONDITIONS)
        marks = ",".join("?" * len(names))
        rows = db.query(
            f"""select loads.run_id, models.name as model, facts.name, facts.value_num, facts.value_text
                from facts join loads on loads.id = facts.load_id join models on models.id = loads.model_id
                where facts.name in ({marks}) and loads.merged_into is null and loads.run_id is not null"""
            + _among("loads.run_id", run_ids),
            names)
        for r in rows:
            value = _fact_text(r["value_num"], r["value_text"])
            if value is None or (r["run_id"], r["model"]) not in out:
                continue
            out[(r["run_id"], r["model"])].setdefault(FACT_CONDITIONS[r["name"]], set()).add(value)
    return {k: {name: " / ".join(sorted(vals)) for name, vals in v.items()} for k, v in out.items()}


def _among(column: str, ids: list[int] | None) -> str:
    """`` and column in (...)`` for a list of integer ids (written in the statement), or nothing."""
    return "" if ids is None else f" and {column} in ({','.join(str(int(i)) for i in ids) or 'null'})"


def changed(before: dict[str, str], after: dict[str, str]) -> list[tuple[str, str, str]]:
    """(condition, before, after) for each condition stored on both sides with different values."""
    order = [*RUN_CONDITIONS, *MODEL_CONDITIONS]
    keys = [k for k in order if k in before and k in after] + sorted(
        k for k in before.keys() & after.keys() if k not in order)
    return [(k, before[k], after[k]) for k in keys if before[k] != after[k]]
