"""Gate summaries for a run: firings per gate and cell, canary status, exclusions."""

from __future__ import annotations

import json
import sys

import sqlite_utils

from cardproof.daemon.campaign.frozen import frozen_campaign
from cardproof.daemon.campaign.evidence import GATES, default_config
from cardproof.marks import N_

from .cell_kinds import ORDER, SQL_STEP_KINDS

_warned: set[tuple[str, int]] = set()

#: why a gate has no canary row (a message id: pages translate it)
NO_CANARIES = N_("canaries were not run (campaign.canaries = false)")


def run_gate_config(db: sqlite_utils.Database, run_id: int) -> dict:
    """The gate configuration of the run's campaign, as parsed when the run froze it.

    A campaign that was unreadable when frozen (or parsed by the migration that added the parsed
    form) gives the defaults, said on stderr.
    """
    campaign = frozen_campaign(db, run_id=run_id)
    if campaign is not None:
        return campaign.gates
    if (id(db.conn), run_id) not in _warned:  # once per run, not once per query
        _warned.add((id(db.conn), run_id))
        print(f"report: run {run_id}: frozen campaign unreadable, gates shown with their defaults", file=sys.stderr)
    return default_config()


def excluded_samples(db: sqlite_utils.Database, run_id: int) -> dict[int, list[str]]:
    """Sample id -> the excluding gates that fired on it (samples kept, medians skip them)."""
    config = run_gate_config(db, run_id)
    excluding = [g for g, c in config.items() if c.exclude]
    if not excluding:
        return {}
    out: dict[int, list[str]] = {}
    marks = ",".join("?" * len(excluding))
    for r in db.query(
        f"""select gate_results.sample_id, gate_results.gate from gate_results
            join samples on samples.id = gate_results.sample_id
            where samples.run_id = ? and gate_results.fired = 1 and gate_results.gate in ({marks})""",
        [run_id, *excluding],
    ):
        out.setdefault(r["sample_id"], []).append(r["gate"])
    return out


def gate_summary(db: sqlite_utils.Database, run_id: int) -> list[dict]:
    """One entry per registered gate: firings in measurement samples, canary status."""
    config = run_gate_config(db, run_id)
    counts = {
        r["gate"]: r
        for r in db.query(
            """select gate, sum(fired = 1) as fired, sum(fired = 0) as not_fired, sum(fired is null) as unknown,
                      count(*) as judged
               from gate_results join samples on samples.id = sample_id
               where samples.run_id = ? and coalesce(samples.kind, 'measure') = 'measure' group by gate""",
            [run_id],
        )
    }
    examples = {
        r["gate"]: r
        for r in db.query(
            """select gate, min(gate_results.id), observed_text, observed_json from gate_results
               join samples on samples.id = sample_id
               where samples.run_id = ? and fired = 1 and coalesce(samples.kind, 'measure') = 'measure'
               group by gate""",
            [run_id],
        )
    }
    canaries = {c["gate"]: c for c in db.query("select * from canaries where run_id = ? order by id", [run_id])}
    # a gate that could observe nothing on any sample of a kind of step judged none of them (it reads what
    # only a measured cell takes: the counters and the embedding probe around the cell)
    unjudged: dict[str, list[str]] = {}
    for r in db.query(
        f"""select gate, samples.kind as kind, count(*) as n, sum(fired is null) as unknown
           from gate_results join samples on samples.id = sample_id
           where samples.run_id = ? and samples.kind in {SQL_STEP_KINDS} group by gate, samples.kind""",
        [run_id],
    ):
        if r["n"] and r["unknown"] == r["n"]:
            unjudged.setdefault(r["gate"], []).append(r["kind"])
    for kinds in unjudged.values():
        kinds.sort(key=ORDER.__getitem__)  # the cell kinds' own order (report/cell_kinds.py)
    per_cell: dict[str, list[dict]] = {}
    for r in db.query(
        """select gate, models.name as model, cells.prompt_class, cells.reasoning, cells.id as cell_id,
                  sum(fired = 1) as fired, count(*) as judged
           from gate_results join samples on samples.id = sample_id join cells on cells.id = samples.cell_id
           join models on models.id = cells.model_id
           where samples.run_id = ? and coalesce(samples.kind, 'measure') = 'measure'
           group by gate, cells.id having sum(fired = 1) > 0 order by cells.position""",
        [run_id],
    ):
        per_cell.setdefault(r["gate"], []).append(r)
    out = []
    for name, gate in GATES.items():
        c = counts.get(name) or {}
        canary = canaries.get(name)
        fired = int(c.get("fired") or 0)
        canary_result = canary["result"] if canary and canary["result"] else "not_run"
        out.append(
            {
                "gate": name,
                "description": gate.description,
                "threshold": config[name].threshold,
                "threshold_unit": gate.threshold_unit,
                "exclude": config[name].exclude,
                "fired_samples": fired,
                "judged_samples": int(c.get("judged") or 0),
                "unobservable_samples": int(c.get("unknown") or 0),
                "unjudged_kinds": unjudged.get(name, []),  # kinds of step samples it judged none of
                "canary": canary_result,
                "canary_reason": canary["reason"] if canary else NO_CANARIES,
                "canary_planned": canary is not None,
                # the reason said in the page's language (report/observations.py); None: prose only
                "canary_reason_json": canary.get("reason_json") if canary else None,
                "canary_sample_id": canary["sample_id"] if canary else None,
                # a gate that never fired and was never seen to fire proves nothing
                "unproven": fired == 0 and canary_result not in ("fired", "recorded"),
                "cells": per_cell.get(name, []),
                "example_text": (examples.get(name) or {}).get("observed_text"),
                "example_json": (examples.get(name) or {}).get("observed_json"),
            }
        )
    return out


def summary_json(db: sqlite_utils.Database, run_id: int) -> str:
    rows = gate_summary(db, run_id)
    return json.dumps([{k: v for k, v in r.items() if k != "cells"} | {"cells": [dict(c) for c in r["cells"]]}
                       for r in rows], indent=2)
