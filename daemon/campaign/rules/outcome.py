"""Evaluate a run's pre-registered rules and store the outcome per model and per arm.

The rules are always read from the campaign text frozen when the run was
registered (principle 7), never from a file that may have changed since: a
model "passes" only by the rule that stood before the run. Re-evaluating a
run replaces its earlier outcomes but can only ever use that same text.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Callable

from cardproof.daemon.store import Store, dumps, utcnow
from cardproof.daemon.campaign.rules import lang
from cardproof.daemon.campaign.rules.facts import model_values
from cardproof.daemon.campaign.frozen import frozen_campaign

OUTCOME = {True: "pass", False: "fail"}


def rule_sha256(text: str) -> str:
    """SHA-256 of a rule's text exactly as registered."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _value(v):
    return None if v is lang.MISSING else v


def judge_rule(text: str, values: dict) -> dict:
    """Outcome of one rule over one model's values: overall and per arm, with the values read."""
    tree = lang.parse(text)
    arms = []
    for arm in lang.arms(tree):
        read = {n: values.get(n) for n in lang.names(arm)}
        entry = {"text": text[arm.pos:arm.end], "values": read}
        try:
            v = lang.evaluate(arm, values)
            entry["outcome"] = "undecided" if v is lang.MISSING else OUTCOME[bool(v)]
            if v is lang.MISSING:
                entry["missing"] = [n for n, x in read.items() if x is None]
        except lang.RuleError as exc:
            entry["outcome"], entry["error"] = "error", str(exc)
        arms.append(entry)
    try:
        v = lang.evaluate(tree, values)
        outcome, error = ("undecided" if v is lang.MISSING else OUTCOME[bool(v)]), None
    except lang.RuleError as exc:
        outcome, error = "error", str(exc)
    return {"outcome": outcome, "arms": arms, "error": error}


def _variants(db, run_id: int) -> list[tuple[int, int, str]]:
    """(variant's model id, its base's, variant name) of a run; none in a store from before variants."""
    try:
        return [tuple(r) for r in db.execute("select model_id, base_model_id, name from variants where run_id = ?",
                                             [run_id]).fetchall()]
    except sqlite3.OperationalError:
        return []


def variant_values(db, run_id: int, base_id: int, gates) -> dict:
    """The values of ``base_id``'s variants in a run, as a rule reads them: ``variant.<name>.<value>``.

    A variant is measured as a model of its own (``base~name``); its values are a model's, minus
    ``pinned``, which is its base's to say.
    """
    out = {}
    for model_id, base, name in _variants(db, run_id):
        if base == base_id:
            out |= {f"variant.{name}.{k}": v for k, v in model_values(db, run_id, model_id, gates).items()
                    if k != "pinned"}
    return out


def rule_values(db, run_id: int, model_ids: list[int], pinned: int | None, gates) -> dict[int, dict]:
    """What a rule or an expectation reads for each model of a run: its own values, its variants'
    (``variant.<name>.*``) and the pinned model's as ``incumbent.*``. One place, so that an expectation
    reads what a rule reads (an expectation once saw every ``incumbent.`` value as missing)."""
    values = {mid: model_values(db, run_id, mid, gates) | variant_values(db, run_id, mid, gates) for mid in model_ids}
    incumbent = {f"incumbent.{k}": v for k, v in values.get(pinned, {}).items()}
    return {mid: v | incumbent for mid, v in values.items()}


def evaluate_rules(store: Store, run_id: int, echo: Callable[[str], None] = print) -> list[dict]:
    """Evaluate the frozen rules of ``run_id`` for every model in it; store and return the rows."""
    db = store.db
    run = db["runs"].get(run_id)
    camp = db["campaigns"].get(run["campaign_id"])
    frozen = frozen_campaign(db, run_id=run_id)
    if frozen is None:  # frozen before this cardproof and unreadable then: no rule can be read from it
        echo(f"rules of run {run_id} not evaluated: its campaign frozen at {camp['registered_at']} is unreadable")
        return []
    models = list(db.query(
        """select distinct models.id, models.name, max(cells.pinned) as pinned from cells
           join models on models.id = cells.model_id where cells.run_id = ? group by models.id order by min(cells.position)""",
        [run_id]))
    variants = {model_id for model_id, _, _ in _variants(db, run_id)}
    models = [m for m in models if m["id"] not in variants]  # judged through their base: variant.<name>.*
    pinned = next((m["id"] for m in models if m["pinned"]), None)
    values = rule_values(db, run_id, [m["id"] for m in models], pinned, frozen.gates)
    rows = []
    for rule_name, text in frozen.rules.items():
        for m in models:
            res = judge_rule(text, values[m["id"]])
            rows.append({
                "run_id": run_id, "model_id": m["id"], "rule_name": rule_name, "rule_text": text,
                "rule_sha256": rule_sha256(text), "campaign_sha256": camp["sha256"],
                "registered_at": camp["registered_at"], "evaluated_at": utcnow(), "outcome": res["outcome"],
                "arms_json": dumps(res["arms"]), "error_text": res["error"],
            })
            arms = ", ".join(a["outcome"] for a in res["arms"])
            echo(f"rule {rule_name} on {m['name']}: {res['outcome']} (arms: {arms})")
    with db.conn:
        db.execute("delete from rule_results where run_id = ?", [run_id])
        if rows:
            db["rule_results"].insert_all(rows)
    return rows
