"""Judge a run: every sample through every gate, then each canary's verdict.

Runs after the measurements (and after log capture), so gates see the load
facts attributed to each sample's load. Re-judging replaces earlier results.
What a gate reads beyond the sample row it gathers itself (``Gate.gather``).
"""

from __future__ import annotations

import json
from dataclasses import fields

from cardproof.daemon.campaign.frozen import frozen_campaign
from cardproof.daemon.gates import GATES, GateConfig, JudgedRun, SampleContext, evaluate
from cardproof.daemon.store.said import Said, Saying, english, said_json
from cardproof.daemon.store import Store, json_text

#: what the judge itself fills in; a gate's gather gives the other fields (or ``extra``)
_JUDGE_FIELDS = {"sample", "response", "max_tokens", "extra"}
_CONTEXT_FIELDS = {f.name for f in fields(SampleContext)} - _JUDGE_FIELDS


def _contexts(store: Store, run: dict, campaign_text: str):
    cells = {c["id"]: c for c in store.db.query("select * from cells where run_id = ?", [run["id"]])}
    judged = JudgedRun(store, run, cells, frozen_campaign(store.db, run_id=run["id"]), campaign_text)
    gatherers = [(name, g.gather(judged)) for name, g in GATES.items() if g.gather is not None]
    for s in store.db.query("select * from samples where run_id = ? and error_kind is null order by id", [run["id"]]):
        response = json.loads(s["response_json"] or "{}")
        known: dict = {}
        extra: dict = {}
        for name, per_sample in gatherers:
            for key, value in per_sample(s, response).items():
                if key in _JUDGE_FIELDS:  # a gate module's mistake, caught by its own test
                    raise ValueError(f"gate {name}: its gather may not set {key!r}, the judge's own field")
                (known if key in _CONTEXT_FIELDS else extra)[key] = value
        yield s, SampleContext(sample=s, response=response, max_tokens=cells[s["cell_id"]]["max_tokens"],
                               **known, extra=extra)


def judge_run(store: Store, run_id: int, gates: dict[str, GateConfig]) -> dict:
    """Write gate_results for every answered sample of the run; settle canary verdicts."""
    run = store.db["runs"].get(run_id)
    text = store.db["campaigns"].get(run["campaign_id"])["toml_text"] or ""
    rows = []
    for s, ctx in _contexts(store, run, text):
        for r in evaluate(ctx, gates):
            r["sample_id"] = s["id"]
            rows.append(r)
    with store.db.conn:
        store.db.execute(
            "delete from gate_results where sample_id in (select id from samples where run_id = ?)", [run_id])
        if rows:
            store.db["gate_results"].insert_all(rows)
    _settle_canaries(store, run_id, gates)
    fired = {}
    for r in rows:
        if r["fired"]:
            fired[r["gate"]] = fired.get(r["gate"], 0) + 1
    return fired


def _settle_canaries(store: Store, run_id: int, gates: dict[str, GateConfig]) -> None:
    for c in list(store.db.query("select * from canaries where run_id = ?", [run_id])):
        if c["result"] == "not_run":
            continue
        if c["sample_id"] is None:
            result, reason = _recorded_said(c, gates)
        else:
            sample = store.db["samples"].get(c["sample_id"])
            if sample["error_kind"]:
                result = "not_fired"
                reason = Said("the canary request failed: {error}", {"error": (sample["error_text"] or "")[:200]})
            else:
                g = next(store.db.query("select * from gate_results where sample_id = ? and gate = ?",
                                        [c["sample_id"], c["gate"]]), None)
                if g is None or g["fired"] is None:
                    result = "not_fired"
                    if g is not None and g["error_text"]:
                        reason = Said("the gate failed: {error}", {"error": g["error_text"]})
                    else:
                        reason = _observed(g) if g is not None else None
                        reason = reason or Said("no gate result")
                else:
                    result = "fired" if g["fired"] else "not_fired"
                    reason = _observed(g)
        if c["sample_id"] is None and c["reason"]:
            planned = _saying(c.get("reason_json"), c["reason"])
            reason = [*(planned if isinstance(planned, list) else [planned]),
                      *(reason if isinstance(reason, list) else [reason])]
        store.update("canaries", c["id"], {"result": result, "reason": english(reason),
                                           "reason_json": _json(reason)})


def _saying(stored_json, text) -> Saying | None:
    """A stored saying (JSON beside its English); the English alone where none is stored or it is damaged."""
    try:
        said = Said.from_json(json.loads(stored_json)) if stored_json else None
    except ValueError:
        said = None
    return said if said is not None else text


def _observed(g: dict) -> Saying | None:
    return _saying(g.get("observed_json"), g.get("observed_text"))


def _json(reason: Saying | None) -> str | None:
    structured = said_json(reason)
    return None if structured is None else json_text(structured, ensure_ascii=False)


def _recorded(canary: dict, gates: dict[str, GateConfig]) -> tuple[str, str]:
    """A canary judged on a recorded line: its verdict and, in English, why."""
    result, reason = _recorded_said(canary, gates)
    return result, english(reason)


def _recorded_said(canary: dict, gates: dict[str, GateConfig]) -> tuple[str, Saying]:
    """A canary judged on a recorded line: the gate's own check on the context its canary builds from it."""
    gate = GATES.get(canary["gate"])
    detail = json.loads(canary["detail_json"] or "{}")
    if not isinstance(detail, dict):
        detail = {}
    build = gate.canary.recorded if gate is not None and gate.canary is not None else None
    ctx = build(detail) if build is not None else None
    if ctx is None:
        return "not_fired", Said("recorded line not readable")
    cfg = gates.get(canary["gate"])
    out = gate.check(ctx, cfg.threshold if cfg else 0.0)
    observed = out.observed_text if isinstance(out.observed_text, Said) else Said.quoted(str(out.observed_text))
    return ("recorded" if out.fired else "not_fired"), Said("{observation} (recorded)", {"observation": observed})
