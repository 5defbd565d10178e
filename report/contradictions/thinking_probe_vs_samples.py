"""The thinking probe says one thing about the reasoning channel, the reasoning-on samples another.

The seeds' case: a probe marked a model's reasoning chain broken while the
same run measured reasoning blocks of thousands of characters on every
call. One of the two measures something other than the other; which one is
not decided here (principle 14).
"""

from __future__ import annotations

from cardproof.marks import N_, NP_

from .base import Contradiction, Detector, Side, said

NO_CHANNEL = {"no_trace", "trace_in_content", "empty", "no_answer_after_trace"}


def _thinking_rows(db, run_id: int) -> dict[str, list[dict]]:
    if "probe_results" not in db.table_names():
        return {}
    out: dict[str, list[dict]] = {}
    for r in db.query("""select probe_results.id, probe_results.verdict, probe_results.arm, models.name as model
                         from probe_results join models on models.id = model_id
                         where run_id = ? and probe = 'thinking' order by probe_results.id""", [run_id]):
        out.setdefault(r["model"], []).append(r)
    return out


def detect(db, view: dict) -> list[Contradiction]:
    out = []
    rows = _thinking_rows(db, view["run"]["id"])
    for m in view["models"]:
        probe = rows.get(m["name"])
        answered = [s for (cls, reasoning), c in m["cells"].items() if reasoning
                    for s in c["samples"] if not s["error_kind"]]
        if not probe or not answered:
            continue
        traced = [s for s in answered if s["reasoning_chars"]]
        broken = [r for r in probe if r["arm"] in NO_CHANNEL]
        passed = [r for r in probe if r["verdict"] == "PASS"]
        if broken and traced:
            chars = sorted(s["reasoning_chars"] for s in traced)
            out.append(Contradiction(
                f"thinking:{m['name']}",
                said(N_("{model}: the thinking probe finds no separate trace, the samples carry one"),
                     {"model": m["name"]}),
                Side(said(NP_("The thinking probe ended {k} of {n} attempt on arm {arm}.",
                              "The thinking probe ended {k} of {n} attempts on arm {arm}."),
                          {"k": len(broken), "n": len(probe), "arm": broken[0]["arm"]}, len(probe)),
                     tuple(f"probe-{r['id']}" for r in broken[:10])),
                Side(said(NP_("{k} of {n} reasoning-on sample returned reasoning text ({low}–{high} characters).",
                              "{k} of {n} reasoning-on samples returned reasoning text ({low}–{high} characters)."),
                          {"k": len(traced), "n": len(answered), "low": chars[0], "high": chars[-1]}, len(answered)),
                     tuple(f"sample-{s['id']}" for s in traced[:10])),
            ))
        elif passed and not traced:
            out.append(Contradiction(
                f"thinking:{m['name']}",
                said(N_("{model}: the thinking probe passes, the samples never show a trace"), {"model": m["name"]}),
                Side(said(NP_("The thinking probe found a separate trace in {k} of {n} attempt.",
                              "The thinking probe found a separate trace in {k} of {n} attempts."),
                          {"k": len(passed), "n": len(probe)}, len(probe)),
                     tuple(f"probe-{r['id']}" for r in passed[:10])),
                Side(said(NP_("The {n} reasoning-on sample returned no reasoning text.",
                              "None of {n} reasoning-on samples returned reasoning text."),
                          {"n": len(answered)}, len(answered)),
                     tuple(f"sample-{s['id']}" for s in answered[:10])),
            ))
    return out


DETECTOR = Detector("thinking_probe_vs_samples", detect)
