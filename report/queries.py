"""Read-only queries that turn store rows into what an article shows.

In short, ``queries.py``: read-only queries that turn rows into a run view (cells,
medians with spread, headline); every per-run query is served by a ``run_id`` index (m017)
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime

import sqlite_utils

from cardproof.daemon.store.liveness import effective_runs
from cardproof.daemon.campaign.registration import registration_for

from . import findings
from .gates import excluded_samples
from .stats import spread
from .variants import variant_rows, variants_view
from cardproof.daemon.store import json_value


def runs(db: sqlite_utils.Database) -> list[dict]:
    """All runs, newest first, with their campaign's name and hash.

    A run stored as ``running`` shows its effective status (``interrupted``
    once its process is gone, see daemon/store/liveness.py) and the coverage of
    the samples it stored so far; nothing is written.
    """
    return effective_runs(db, list(
        db.query(
            """
            select runs.*, campaigns.name as campaign_name, campaigns.sha256 as campaign_sha256,
                   campaigns.registered_at as campaign_registered_at
            from runs join campaigns on campaigns.id = runs.campaign_id
            order by runs.started_at desc, runs.id desc
            """
        )
    ))


def _median_ids(valid: list[dict], key: str) -> set:
    """The sample(s) a median of ``key`` is: the middle one, or the middle two where n is even."""
    ranked = sorted((s for s in valid if isinstance(s.get(key), (int, float))), key=lambda s: s[key])
    mid = len(ranked) // 2
    return {s["id"] for s in (ranked[mid - 1:mid + 1] if len(ranked) % 2 == 0 else ranked[mid:mid + 1])}


def run_view(db: sqlite_utils.Database, run_id: int) -> dict:
    """Everything one run article needs, computed from rows alone."""
    run = _run_row(db, run_id)
    limits = findings.report_limits(run["campaign_json"])
    cells, samples, loads = _measured_rows(db, run_id)
    _judge_cells(cells, samples, limits)
    models = _models_of(cells, loads)
    # a variant is measured as a model of its own (base~name): its figures go to the Variants section,
    # not into the headline and the main table, which compare the campaign's models
    variant_of = variant_rows(db, run_id)
    variant_names = {v["model"] for v in variant_of}
    variant_models = {n: m for n, m in models.items() if n in variant_names}
    models = {n: m for n, m in models.items() if n not in variant_names}
    classes = list(dict.fromkeys(c["prompt_class"] for c in cells))
    return {
        "run": run,
        "gpus": _gpus(run["gpus_json"]),
        "props": json.loads(run["server_props_json"] or "{}"),
        "cells": cells,
        "samples": samples,
        "loads": loads,
        "models": list(models.values()),
        "classes": classes,
        "reasoning_modes": sorted({bool(c["reasoning"]) for c in cells}),
        "class_tokens": _class_tokens(cells, classes),
        "exceptions": [s for s in samples if s["error_kind"]],
        "canary_samples": list(db.query(
            "select samples.*, cells.canary_gate from samples join cells on cells.id = samples.cell_id "
            "where samples.run_id = ? and samples.kind = 'canary' order by samples.id", [run_id])),
        "excluded_count": sum(1 for s in samples if s["excluded_by"]),
        "excluded_by_gate": _count_by_gate(samples),
        "headline": findings.headline(list(models.values()), classes),
        "every_sample": findings.every_sample_order(list(models.values()), classes),
        "unstable_ratio": limits["unstable_ratio"],
        "unstable_interval_pct": limits["unstable_interval_pct"],
        "unstable_cells": [c for c in cells if c["unstable"]],
        "variants": variants_view(db, run_id, list(models.values()), variant_models, variant_of, classes),
    }


def _run_row(db: sqlite_utils.Database, run_id: int) -> dict:
    """The run's row with its campaign's, its effective status and its registration; KeyError if none."""
    run = next(
        db.query(
            """
            select runs.*, campaigns.name as campaign_name, campaigns.sha256 as campaign_sha256,
                   campaigns.registered_at as campaign_registered_at, campaigns.toml_text as campaign_text,
                   campaigns.campaign_json as campaign_json, campaigns.path as campaign_path
            from runs join campaigns on campaigns.id = runs.campaign_id where runs.id = ?
            """,
            [run_id],
        ),
        None,
    )
    if run is None:
        raise KeyError(f"no run {run_id}")
    run = effective_runs(db, [run])[0]
    run["registration"] = _registration(db, run)
    return run


def _measured_rows(db: sqlite_utils.Database, run_id: int) -> tuple[list[dict], list[dict], list[dict]]:
    """The run's prompt-class cells, their samples (each with the gates that fired on it and those that
    exclude it) and the run's loads (each marked whether it is a measured load)."""
    cells = list(db.query(
        """
        select cells.*, models.name as model, models.file_bytes, models.quantisation,
               models.architecture, models.digest, models.path as model_path
        from cells join models on models.id = cells.model_id
        where cells.run_id = ? and coalesce(cells.kind, 'measure') = 'measure' order by cells.position
        """,
        [run_id],
    ))
    samples = list(db.query(
        "select * from samples where run_id = ? and coalesce(kind, 'measure') = 'measure' order by id", [run_id]))
    loads = list(db.query(
        """select loads.*, models.name as model, samples.kind as sample_kind
           from loads join models on models.id = loads.model_id
           left join samples on samples.id = loads.sample_id
           where loads.run_id = ? and loads.merged_into is null order by loads.id""",
        [run_id],
    ))
    for ld in loads:
        ld["measured"] = is_measured_load(ld)
    excluded = excluded_samples(db, run_id)
    fired: dict[int, list[str]] = defaultdict(list)
    for r in db.query(
        "select sample_id, gate from gate_results join samples on samples.id = sample_id "
        "where samples.run_id = ? and fired = 1 order by gate_results.id", [run_id]):
        fired[r["sample_id"]].append(r["gate"])
    for s in samples:
        s["excluded_by"] = excluded.get(s["id"], [])
        s["fired_gates"] = fired.get(s["id"], [])
    return cells, samples, loads


def _judge_cells(cells: list[dict], samples: list[dict], limits: dict) -> None:
    """Each cell's samples, valid ones, spreads, median samples and stability, set on the cell."""
    by_cell = defaultdict(list)
    for s in samples:
        by_cell[s["cell_id"]].append(s)
    for c in cells:
        ss = by_cell[c["id"]]
        valid = [s for s in ss if not s["error_kind"] and not s["excluded_by"]]
        c["samples"] = ss
        c["valid"] = valid
        c["errors"] = [s for s in ss if s["error_kind"]]
        c["excluded"] = [s for s in ss if s["excluded_by"]]
        c["decode"] = spread(s["decode_tps"] for s in valid)
        # the sample(s) the median is: the middle one, or the middle two where n is even
        c["median_ids"] = _median_ids(valid, "decode_tps")
        # each figure its own: the prefill and TTFT medians are often other samples than decode's
        c["prefill_median_ids"] = _median_ids(valid, "prefill_tps")
        c["ttft_median_ids"] = _median_ids(valid, "ttft_ms")
        findings.judge_cell(c, limits)  # spread_ratio, median_interval, unstable_by, unstable
        c["prefill"] = spread(s["prefill_tps"] for s in valid)
        c["ttft"] = spread(s["ttft_ms"] for s in valid)
        toks = [s["prompt_tokens"] for s in valid if s["prompt_tokens"] is not None]
        c["prompt_tokens"] = (min(toks), max(toks)) if toks else None


def _models_of(cells: list[dict], loads: list[dict]) -> dict[str, dict]:
    """Model name -> its cells by (prompt class, reasoning), its loads and the spread of its measured loads."""
    models: dict[str, dict] = {}
    for c in cells:
        m = models.setdefault(
            c["model"],
            {"name": c["model"], "file_bytes": c["file_bytes"], "quantisation": c["quantisation"],
             "architecture": c["architecture"], "pinned": bool(c["pinned"]), "cells": {}, "loads": []},
        )
        m["cells"][(c["prompt_class"], bool(c["reasoning"]))] = c
    for ld in loads:
        if ld["model"] in models:
            models[ld["model"]]["loads"].append(ld)
    for m in models.values():
        # canary reloads, canary and probe requests never enter a measured figure
        m["load"] = spread(ld["load_seconds"] for ld in m["loads"] if ld["measured"] and ld["load_seconds"])
    return models


def _class_tokens(cells: list[dict], classes: list[str]) -> dict[str, tuple[int, int] | None]:
    """Per prompt class the fewest and most prompt tokens of its valid samples."""
    out = {}
    for cls in classes:
        toks = [s["prompt_tokens"] for c in cells if c["prompt_class"] == cls for s in c["valid"]
                if s["prompt_tokens"] is not None]
        out[cls] = (min(toks), max(toks)) if toks else None
    return out


def _gpus(raw: str | None) -> dict:
    """``gpus_json`` in the shape the setup section prints: entries with ``name`` and ``memory_total_mib``.

    An older or damaged row may hold other shapes; what is not a GPU entry
    is left out rather than failing the article.
    """
    data = json_value(raw, dict, {})
    gpus = data.get("gpus") if isinstance(data.get("gpus"), list) else []
    return data | {"gpus": [{"name": g.get("name"), "memory_total_mib": g.get("memory_total_mib")} | g
                            for g in gpus if isinstance(g, dict)]}


def _count_by_gate(samples: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in samples:
        for g in s["excluded_by"]:
            out[g] = out.get(g, 0) + 1
    return dict(sorted(out.items()))


def _registration(db, run: dict) -> dict | None:
    """The pre-registration of the run's exact campaign text, made before the run started; None if none.

    A run linked by ``cardproof run`` names it; otherwise the link is the hash
    itself (the earliest registration of the same SHA-256 before the start).
    """
    reg = None
    try:
        if run.get("registration_id") is not None and "registrations" in db.table_names():
            reg = next(iter(db.query("select * from registrations where id = ?", [run["registration_id"]])), None)
        if reg is None and run.get("campaign_sha256"):
            reg = registration_for(db, run["campaign_sha256"], before=run.get("started_at"))
    except Exception:  # noqa: BLE001 -- a damaged registration row: the run reads as registered at its start
        reg = None
    if not reg or reg.get("sha256") != run.get("campaign_sha256"):
        return None
    try:
        before_s = (datetime.fromisoformat(run["started_at"]) - datetime.fromisoformat(reg["registered_at"])
                    ).total_seconds()
    except (TypeError, ValueError):
        return None
    if before_s < 0:
        return None
    return {"id": reg["id"], "registered_at": reg["registered_at"], "seconds_before": before_s,
            "days_before": before_s / 86400, "sha256": reg["sha256"]}


def is_measured_load(ld: dict) -> bool:
    """A load the runner made for a measured cell: an explicit load, or one inside a measured request.

    A load seen only in a server log, one inside a canary request (the
    ``load_time`` canary evicts on purpose) or inside a probe is no
    measurement of how long the model takes to load.
    """
    if ld.get("origin") == "log":
        return False
    if ld.get("trigger") == "explicit":
        return True
    return ld.get("sample_id") is not None and (ld.get("sample_kind") or "measure") == "measure"
