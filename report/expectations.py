"""Expectations: what the author believed before measuring, stated as confirmed or refuted by the run.

They are written in the pass-rule language under ``[expectations]`` of the
campaign and read from the text frozen with the run, like the rules. Each is
judged per model over the same values a rule reads; the figures it read are
shown as the ones that decided it. A figure from an unstable cell decides
nothing (report.findings).
"""

from __future__ import annotations

from cardproof.daemon.campaign import CampaignError, parse_campaign
from cardproof.daemon.rules.facts import model_values
from cardproof.daemon.rules.outcome import judge_rule, variant_values
from cardproof.daemon.variants.settings import derived_name

VERDICT = {"pass": "confirmed", "fail": "refuted"}


def expectations_view(db, view: dict) -> list[dict]:
    """Per expectation: name, text, and per model its verdict with the values it read."""
    try:
        camp = parse_campaign(view["run"]["campaign_text"] or "", "frozen campaign")
    except CampaignError:
        return []  # a frozen text this cardproof cannot read: the article states no expectation from it
    if not camp.expectations:
        return []
    run_id = view["run"]["id"]
    ids = dict(db.execute("select models.name, models.id from cells join models on models.id = cells.model_id "
                          "where cells.run_id = ? group by models.id", [run_id]).fetchall())
    unstable = {(c["model"], c["prompt_class"]) for c in view.get("unstable_cells", [])}
    values = {m["name"]: model_values(db, run_id, ids[m["name"]], camp.gates)
              | variant_values(db, run_id, ids[m["name"]], camp.gates) for m in view["models"] if m["name"] in ids}
    out = []
    for name, text in camp.expectations.items():
        rows = []
        for model, vals in values.items():
            res = judge_rule(text, vals)
            read = {k: v for arm in res["arms"] for k, v in (arm.get("values") or {}).items()}
            verdict = VERDICT.get(res["outcome"], "undecided")
            # a variant's figure (variant.<name>.decode.<class>) decides nothing from its unstable cell either
            if any(f"decode.{cls}" in read for m, cls in unstable if m == model) or any(
                    k.startswith("variant.") and k.endswith(f".decode.{cls}")
                    and m == derived_name(model, k.split(".")[1]) for k in read for m, cls in unstable):
                verdict = "unstable"
            rows.append({"model": model, "verdict": verdict, "read": read, "error": res["error"]})
        out.append({"name": name, "text": text, "models": rows})
    return out
