"""The load's log says one thing about speculative decoding, the samples another."""

from __future__ import annotations

from .base import Contradiction, Side


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
                {"en": f"{m['name']}: speculative decoding off in the log, on in the answers",
                 "de": f"{m['name']}: spekulatives Decoding laut Log aus, laut Antworten an"},
                Side({"en": "The load's log line says no speculative decoding is configured.",
                      "de": "Die Logzeile des Ladevorgangs sagt, es sei kein spekulatives Decoding eingerichtet."},
                     (line,) if line else ()),
                Side({"en": f"{len(drafted)} samples report draft tokens.",
                      "de": f"{len(drafted)} Messungen melden Draft-Token."},
                     tuple(f"sample-{s['id']}" for s in drafted[:10])),
            ))
        elif not says_none and samples and not drafted:
            out.append(Contradiction(
                f"spec:{m['name']}",
                {"en": f"{m['name']}: speculative decoding configured, never used",
                 "de": f"{m['name']}: spekulatives Decoding eingerichtet, nie genutzt"},
                Side({"en": f"The load's log configures speculative decoding ({spec['value_text']}).",
                      "de": f"Das Log des Ladevorgangs richtet spekulatives Decoding ein ({spec['value_text']})."},
                     (line,) if line else ()),
                Side({"en": f"None of {len(samples)} samples reports a draft token.",
                      "de": f"Keine von {len(samples)} Messungen meldet ein Draft-Token."},
                     tuple(f"sample-{s['id']}" for s in samples[:10])),
            ))
    return out
