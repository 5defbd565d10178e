"""The load's log says one thing about speculative decoding, the samples another."""

from __future__ import annotations

from cardproof.marks import N_, NP_

from .base import Contradiction, Detector, Side, said


def _spec_facts(db, load_ids: list[int]) -> dict:
    if not load_ids or "facts" not in db.table_names():
        return {}
    marks = ",".join("?" * len(load_ids))
    out = {}
    for f in db.query(f"select id, line_id, name, value_text, value_num from facts where load_id in ({marks}) "
                      "and name in ('spec_type', 'draft_model')", load_ids):
        out.setdefault(f["name"], f)
    return out


def detect(db, view: dict) -> list[Contradiction]:
    out = []
    for m in view["models"]:
        load_ids = [ld["id"] for ld in m["loads"]]
        facts = _spec_facts(db, load_ids)
        spec = facts.get("spec_type")
        if not spec:
            continue
        samples = [s for c in m["cells"].values() for s in c["valid"]]
        drafted = [s for s in samples if s["draft_tokens"]]
        says_none = (spec["value_text"] or "").lower() in ("none", "")
        line = f"line-{spec['line_id']}" if spec["line_id"] else None
        if says_none and drafted:
            out.append(Contradiction(
                f"spec:{m['name']}",
                said(N_("{model}: speculative decoding off in the log, on in the answers"), {"model": m["name"]}),
                Side(said(N_("The load's log line says no speculative decoding is configured.")),
                     (line,) if line else ()),
                Side(said(NP_("{n} sample reports draft tokens.", "{n} samples report draft tokens."),
                          {"n": len(drafted)}, len(drafted)),
                     tuple(f"sample-{s['id']}" for s in drafted[:10])),
            ))
        elif not says_none and samples and not drafted:
            out.append(Contradiction(
                f"spec:{m['name']}",
                said(N_("{model}: speculative decoding configured, never used"), {"model": m["name"]}),
                Side(said(N_("The load's log configures speculative decoding ({value})."),
                          {"value": spec["value_text"]}),
                     (line,) if line else ()),
                Side(said(NP_("The {n} sample reports no draft token.", "None of {n} samples reports a draft token."),
                          {"n": len(samples)}, len(samples)),
                     tuple(f"sample-{s['id']}" for s in samples[:10])),
            ))
    return out


DETECTOR = Detector("spec_facts_vs_samples", detect)
