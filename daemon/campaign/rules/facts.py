"""The values a pass rule reads, gathered per model from one run's rows.

Every value comes from what the run stored: load facts parsed from the log,
memory read from the card, medians of the samples that the gates let
through, probe summaries. A value the run does not have is simply absent,
and the rule over it is "undecided" (lang.MISSING), never guessed.
"""

from __future__ import annotations

import json
import statistics

from cardproof.daemon.gates import GateConfig
from cardproof.daemon.logs.fit_evidence import rule_values as fit_rule_values
from cardproof.daemon.campaign.frozen import frozen_campaign
from cardproof.daemon.campaign.slo import rule_values as load_rule_values
from cardproof.daemon.memory.readings import is_card_device
from cardproof.daemon.memory.reconcile import reconcile_load
from cardproof.daemon.probes.base import summarise
from cardproof.daemon.quality.figures import rule_values as quality_rule_values
from cardproof.daemon.campaign.rules import schema as N


def _excluded(db, run_id: int, gates: dict[str, GateConfig]) -> set[int]:
    excluding = [g for g, c in gates.items() if c.exclude]
    if not excluding:
        return set()
    marks = ",".join("?" * len(excluding))
    return {r[0] for r in db.execute(
        f"""select gate_results.sample_id from gate_results join samples on samples.id = gate_results.sample_id
            where samples.run_id = ? and gate_results.fired = 1 and gate_results.gate in ({marks})""",
        [run_id, *excluding]).fetchall()}


def _load_facts(db, load_ids: list[int]) -> dict:
    """Facts of the model's last load that has any (a reload repeats them)."""
    out: dict = {}
    for load_id in reversed(load_ids):
        rows = list(db.query("select name, device, value_num, value_text from facts where load_id = ? order by id",
                             [load_id]))
        if not rows:
            continue
        sums: dict[str, float] = {}
        for f in rows:
            value = f["value_num"] if f["value_num"] is not None else f["value_text"]
            if f["name"] in N.BUFFERS and f["device"]:
                out[f"{f['name']}.{f['device']}"] = value
                if is_card_device(f["device"]) and isinstance(value, (int, float)):
                    sums[f["name"]] = sums.get(f["name"], 0.0) + value
            elif f["name"] in N.FACT_NUM and isinstance(value, (int, float)):
                out[f["name"]] = float(value)
            elif f["name"] in N.FACT_TEXT and value is not None:
                out[f["name"]] = str(value)
        out.update(sums)
        break
    return out


def _memory(db, load_ids: list[int]) -> dict:
    out: dict = {}
    if load_ids:
        card = reconcile_load(db, load_ids[-1])["card"]
        if card.get("card_mib") is not None:
            out["card_mib"] = float(card["card_mib"])
        marks = ",".join("?" * len(load_ids))
        row = db.execute(f"select items_json from memory_selfreports where load_id in ({marks}) order by id desc limit 1",
                         load_ids).fetchone()
        share = json.loads(row[0] or "{}").get("gpu_share") if row else None
        if isinstance(share, (int, float)):
            out["gpu_share_pct"] = 100.0 * share
    return out


def _medians(db, run_id: int, model_id: int, excluded: set[int]) -> dict:
    values: dict[str, list[float]] = {}
    for s in db.query(
        """select samples.id, samples.decode_tps, samples.prefill_tps, samples.ttft_ms, cells.prompt_class,
                  cells.reasoning
           from samples join cells on cells.id = samples.cell_id
           where samples.run_id = ? and cells.model_id = ? and coalesce(cells.kind, 'measure') = 'measure'
             and coalesce(samples.kind, 'measure') = 'measure' and samples.error_kind is null""",
        [run_id, model_id],
    ):
        if s["id"] in excluded:
            continue
        suffix = ".reasoning" if s["reasoning"] else ""
        for key, col in (("decode", "decode_tps"), ("prefill", "prefill_tps"), ("ttft_ms", "ttft_ms")):
            if s[col] is not None:
                values.setdefault(f"{key}.{s['prompt_class']}{suffix}", []).append(s[col])
    return {k: statistics.median(v) for k, v in values.items()}


def _probes(db, run_id: int, model_id: int) -> dict:
    by_probe: dict[str, list[dict]] = {}
    for r in db.query("select * from probe_results where run_id = ? and model_id = ? order by id", [run_id, model_id]):
        by_probe.setdefault(r["probe"], []).append(r)
    out = {}
    for probe, rows in by_probe.items():
        s = summarise(rows)
        out[f"probe.{probe}"] = s["verdict"]
        out[f"probe.{probe}.passed"] = float(s["passed"])
        out[f"probe.{probe}.total"] = float(s["total"])
    return out


def model_values(db, run_id: int, model_id: int, gates: dict[str, GateConfig]) -> dict:
    """Every rule name this run can supply for one model -> its value."""
    load_ids = [r[0] for r in db.execute(
        """select id from loads where run_id = ? and model_id = ? and merged_into is null
           and coalesce(status, 'loaded') != 'failed' and coalesce(trigger, '') not in ('fit', 'quality') order by id""",
        [run_id, model_id]).fetchall()]  # a fit load's context is the fit test's, a quality load's llama-perplexity's
    out = _load_facts(db, load_ids)
    # measured loads only, as the article's Load column: a canary's reload or a probe's is no load time
    secs = [r[0] for r in db.execute(
        """select load_seconds from loads left join samples on samples.id = loads.sample_id
           where loads.run_id = ? and loads.model_id = ? and load_seconds is not null
           and loads.merged_into is null and coalesce(loads.origin, '') != 'log'
           and (loads.trigger = 'explicit' or coalesce(samples.kind, 'measure') = 'measure')""",
        [run_id, model_id]).fetchall()]
    if secs:  # timed by the runner itself; the log's own figure stays the fallback
        out["load_seconds"] = statistics.median(secs)
    out |= _memory(db, load_ids)
    out |= _medians(db, run_id, model_id, _excluded(db, run_id, gates))
    out |= _probes(db, run_id, model_id)
    frozen = frozen_campaign(db, run_id=run_id)  # unreadable when frozen: no level, the rule stays undecided
    out |= load_rule_values(db.conn, run_id, model_id, frozen.load.slo if frozen and frozen.load else None)
    out |= fit_rule_values(db.conn, run_id, model_id)
    out |= quality_rule_values(db.conn, run_id, model_id)
    pinned = db.execute("select max(pinned) from cells where run_id = ? and model_id = ?", [run_id, model_id]).fetchone()
    out["pinned"] = bool(pinned and pinned[0])
    return out
