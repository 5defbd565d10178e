"""The thinking probe says one thing about the reasoning channel, the reasoning-on samples another.

The seeds' case: a probe marked a model's reasoning chain broken while the
same run measured reasoning blocks of thousands of characters on every
call. One of the two measures something other than the other; which one is
not decided here (principle 14).
"""

from __future__ import annotations

from .base import Contradiction, Side

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
                {"en": f"{m['name']}: the thinking probe finds no separate trace, the samples carry one",
                 "de": f"{m['name']}: die Denk-Prüfung findet keine getrennte Denkspur, die Messungen tragen eine"},
                Side({"en": f"The thinking probe ended {len(broken)} of {len(probe)} attempts on arm {broken[0]['arm']}.",
                      "de": f"Die Denk-Prüfung endete in {len(broken)} von {len(probe)} Versuchen im Zweig {broken[0]['arm']}."},
                     tuple(f"probe-{r['id']}" for r in broken[:10])),
                Side({"en": f"{len(traced)} of {len(answered)} reasoning-on samples returned reasoning text "
                            f"({chars[0]}–{chars[-1]} characters).",
                      "de": f"{len(traced)} von {len(answered)} Messungen mit Reasoning lieferten Denktext "
                            f"({chars[0]}–{chars[-1]} Zeichen)."},
                     tuple(f"sample-{s['id']}" for s in traced[:10])),
            ))
        elif passed and not traced:
            out.append(Contradiction(
                f"thinking:{m['name']}",
                {"en": f"{m['name']}: the thinking probe passes, the samples never show a trace",
                 "de": f"{m['name']}: die Denk-Prüfung besteht, die Messungen zeigen nie eine Denkspur"},
                Side({"en": f"The thinking probe found a separate trace in {len(passed)} of {len(probe)} attempts.",
                      "de": f"Die Denk-Prüfung fand in {len(passed)} von {len(probe)} Versuchen eine getrennte Denkspur."},
                     tuple(f"probe-{r['id']}" for r in passed[:10])),
                Side({"en": f"None of {len(answered)} reasoning-on samples returned reasoning text.",
                      "de": f"Keine von {len(answered)} Messungen mit Reasoning lieferte Denktext."},
                     tuple(f"sample-{s['id']}" for s in answered[:10])),
            ))
    return out
