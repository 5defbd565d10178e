"""Expectations: what the author believed before measuring, stated as confirmed or refuted by the run.

They are written in the pass-rule language under ``[expectations]`` of the
campaign and read from the text frozen with the run, like the rules. Each is
judged per model over the same values a rule reads; the figures it read are
shown as the ones that decided it. A figure from an unstable cell decides
nothing (report.findings).
"""

from __future__ import annotations

from cardproof.daemon.campaign.frozen import frozen_campaign
from cardproof.daemon.campaign.rules.outcome import judge_rule, rule_values
from cardproof.daemon.campaign.tables.variants import derived_name

VERDICT = {"pass": "confirmed", "fail": "refuted"}


def expectations_view(db, view: dict) -> list[dict]:
    """Per expectation: name, text, and per model its verdict with the values it read."""
    camp = frozen_campaign(db, run_id=view["run"]["id"])
    if camp is None:
        return []  # a campaign unreadable when frozen: the article states no expectation from it
    if not camp.expectations:
        return []
    run_id = view["run"]["id"]
    ids = dict(db.execute("select models.name, models.id from cells join models on models.id = cells.model_id "
                          "where cells.run_id = ? group by models.id", [run_id]).fetchall())
    unstable = {(c["model"], c["prompt_class"]) for c in view.get("unstable_cells", [])}
    names = [m["name"] for m in view["models"] if m["name"] in ids]
    pinned = next((m["name"] for m in view["models"] if m.get("pinned") and m["name"] in ids), None)
    by_id = rule_values(db, run_id, [ids[n] for n in names], ids.get(pinned), camp.gates)
    values = {n: by_id[ids[n]] for n in names}
    out = []
    for name, text in camp.expectations.items():
        rows = []
        for model, vals in values.items():
            res = judge_rule(text, vals)
            read = {k: v for arm in res["arms"] for k, v in (arm.get("values") or {}).items()}
            verdict = VERDICT.get(res["outcome"], "undecided")
            # a figure of an unstable cell decides nothing: the model's own, a variant's
            # (variant.<name>.decode.<class>) or the incumbent's (incumbent.decode.<class>)
            if any(_whose(k, model, pinned) == m and k.endswith(f"decode.{cls}") for k in read for m, cls in unstable):
                verdict = "unstable"
            rows.append({"model": model, "verdict": verdict, "read": read, "error": res["error"]})
        out.append({"name": name, "text": text, "models": rows})
    return out


def _whose(key: str, model: str, pinned: str | None) -> str | None:
    """The model whose cell a value a rule read comes from."""
    if key.startswith("incumbent."):
        return pinned
    if key.startswith("variant."):
        return derived_name(model, key.split(".")[1])
    return model
