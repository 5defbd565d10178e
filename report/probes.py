"""Read-only queries for probe verdicts, pass rules and the decision section.

``decision_view(db, run_id)`` is what ``sections/decision.md.j2`` needs
(variable ``decision``). Verdicts come with their probe's known defects;
rule outcomes only count as "pass" when the rule text is the one frozen
with the campaign before the run started (principle 7).

In short, ``probes.py``: probe verdicts, pass rules and the decision section
(``decision_view``): each verdict with its probe's known defects and each task's arm; per model and
probe how many answers kept the asked format; the probes on which every model passed exactly the
tasks every model passed (``not_separating``: they do not separate the models, and a candidate and
an incumbent that passed the same tasks differ in nothing that counts); one line per model that
invented a tool result (``fabrications``); for each group of one base model at several quantisations
(requantized from one another, or alike in their GGUF headers) to how many probe questions their
answers at temperature 0 differ (``ladder_answers``). The evidence page shows every exchange whole
(``_evidence``: question, tools offered, every answer with trace, calls and the tool result sent,
what the probe read and why), foreign text only escaped or fenced, long exchanges folded
(``templates/sections/probe_exchanges.md.j2``)
"""

from __future__ import annotations

import hashlib
import json
import re

from cardproof.daemon.campaign.frozen import frozen_campaign
from cardproof.daemon.campaign.evidence import PROBES
from cardproof.daemon.campaign.evidence import message, summarise
from cardproof.daemon.campaign.evidence import load_defects
from cardproof.daemon.campaign.rules.outcome import rule_sha256

from cardproof.marks import N_
from .findings import cells_measurable
from cardproof.daemon.store import json_value


NO_GRADE = ("INCONCLUSIVE", "ERROR", "SKIP")


def _has(db, table: str) -> bool:
    return table in db.table_names()


def capabilities(db, run_id: int) -> dict[str, dict]:
    """model name -> {"declared": {...}, "evidence": {...}, "source": ...} as read in this run."""
    if not _has(db, "capabilities"):
        return {}
    out = {}
    for r in db.query("""select models.name, capabilities.json from capabilities join models on models.id = model_id
                         where run_id = ? order by capabilities.id""", [run_id]):
        out[r["name"]] = json.loads(r["json"] or "{}")  # a damaged row is read as NULL (tolerance.py)
    return out


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clean(text: str) -> str:
    """A model's raw output, whole, without control characters (they break pages); the page's escaper
    still caps a text at ``mdsafe.MAX_SHOWN_CHARS``."""
    return _CONTROL.sub("\ufffd", text or "")


#: an exchange longer than this (characters of its answers, or lines) is folded on the evidence page
FOLD_CHARS, FOLD_LINES = 600, 12


def _question(request: dict) -> str:
    """The user's words of a request, whole; an image is named by its kind and size, not printed."""
    parts = []
    for msg in (request or {}).get("messages") or []:
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        for c in ([{"type": "text", "text": content}] if isinstance(content, str) else content or []):
            if isinstance(c, dict) and c.get("type") == "text":
                parts.append(str(c.get("text") or ""))
            elif isinstance(c, dict) and c.get("type") == "image_url":
                url = str((c.get("image_url") or {}).get("url") or "")
                parts.append(f"[image: {url.split(',', 1)[0]}, {len(url)} characters]")
    return _clean("\n\n".join(parts))


def _tools_offered(request: dict) -> list[dict]:
    """The tools a request offered the model: name, parameters, description."""
    out = []
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) and isinstance(t.get("function"), dict) else {}
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        names = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        out.append({"name": str(fn.get("name") or "?"), "parameters": ", ".join(map(str, names)),
                    "description": str(fn.get("description") or "")})
    return out


def _turns(requests: list, responses: list) -> list[dict]:
    """Each answer of an exchange, whole, with the tool results sent before it (a second turn)."""
    out = []
    for i, resp in enumerate(responses):
        sent = []
        if i and i < len(requests) and isinstance(requests[i], dict) and isinstance(requests[i - 1], dict):
            later = (requests[i].get("messages") or [])[len(requests[i - 1].get("messages") or []):]
            sent = [str(m.get("content") or "") for m in later if isinstance(m, dict) and m.get("role") == "tool"]
        msg = message(resp)
        calls = json.dumps(msg["tool_calls"], ensure_ascii=False, indent=1) if msg["tool_calls"] else ""
        out.append({"tool_results": _clean("\n".join(sent)), "answer": _clean(msg["content"]),
                    "reasoning": _clean(msg["reasoning"]), "tool_calls": _clean(calls),
                    "finish_reason": msg["finish_reason"]})
    return out


def _evidence(row: dict) -> dict:
    """A stored exchange for the evidence page, whole: the question, the tools offered, every answer (its
    trace and calls), and the detail the probe decided on (what it read and why)."""
    ex = json.loads(row["exchange_json"] or "{}")
    requests = [r for r in ex.get("requests") or [] if isinstance(r, dict)]
    responses = [r for r in ex.get("responses") or [] if r]
    msg = message(responses[-1]) if responses else message(None)
    detail = json.loads(row["detail_json"] or "{}")
    detail = detail if isinstance(detail, dict) else {}
    turns = _turns(requests, responses)
    said = "\n".join(t["answer"] + t["reasoning"] + t["tool_calls"] for t in turns)
    return {
        "id": row["id"], "variant": row["variant"], "attempt": row["attempt"], "verdict": row["verdict"],
        "raw_verdict": row["raw_verdict"], "arm": row["arm"], "graded": bool(row["graded"]),
        "duration_ms": row["duration_ms"], "requests": len(requests),
        "question": _question(requests[0]) if requests else "",
        "tools_offered": _tools_offered(requests[0]) if requests else [],
        "turns": turns, "detail": detail,
        "long": len(said) > FOLD_CHARS or said.count("\n") >= FOLD_LINES,
        "answer": _clean(msg["content"]), "reasoning": _clean(msg["reasoning"]),
        "tool_calls": _clean(json.dumps(msg["tool_calls"], ensure_ascii=False)) if msg["tool_calls"] else "",
        "error": _clean(_named(detail) + (ex.get("error") or ex.get("note") or "")),
        "code": _clean(detail.get("code") or ""),
        "fabricated": _clean(detail.get("fabricated") or ""),
        "signature": _signature(responses),
    }


def _signature(responses: list[dict]) -> str:
    """What a model said in an exchange (every answer's text, trace and calls), as a hash: two models gave
    the same answer to a question when these match."""
    said = [message(r) for r in responses]
    text = json.dumps([[m["content"], m["reasoning"], m["tool_calls"]] for m in said], sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _named(detail: dict) -> str:
    """An error verdict's field and value first (daemon/probes/base.py ``error_detail``): a cut-off answer's
    error text shows the body's start, its detail where the body stopped."""
    if not isinstance(detail, dict) or not detail.get("field"):
        return ""
    where = str(detail["field"])
    if isinstance(detail.get("at_char"), int) and isinstance(detail.get("length"), int):
        where += f" at character {detail['at_char']} of {detail['length']}"
    if detail.get("key"):
        where += f", in \"{detail['key']}\""
    value = f": {detail['value']}" if detail.get("value") is not None else ""
    reason = f" ({detail['reason']})" if detail.get("reason") else ""
    return f"{where}{value}{reason} — "


def _dedupe(results: list[dict]) -> list[dict]:
    """A repeat that came back exactly like an earlier attempt is shown as that, not printed twice."""
    first: dict[tuple, int] = {}
    for e in results:
        key = (e["variant"], e["verdict"], e["arm"], e["answer"], e["reasoning"], e["tool_calls"], e["code"], e["error"])
        e["repeat_of"] = first.get(key)
        first.setdefault(key, e["attempt"])
    return results


def _format_count(rows: list[dict]) -> dict | None:
    """How many of a probe's stored answers had the form it asked for (``format_followed`` in their detail):
    ``{"followed": n, "answers": m}``, or None for a probe that asks no form."""
    flags = []
    for r in rows:
        detail = json_value(r["detail_json"])  # a damaged row: no answer to count, never a failed build
        if isinstance(detail, dict) and isinstance(detail.get("format_followed"), bool):
            flags.append(detail["format_followed"])
    return {"followed": sum(flags), "answers": len(flags)} if flags else None


def probe_summaries(db, run_id: int, defects: dict | None = None) -> list[dict]:
    """Per model (campaign order): each probe's summary, defects, declaration and evidence rows."""
    if not _has(db, "probe_results"):
        return []
    defects = load_defects() if defects is None else defects
    caps = capabilities(db, run_id)
    models: dict[str, dict] = {}
    for r in db.query("""select probe_results.*, models.name as model,
                                (select max(pinned) from cells where cells.run_id = probe_results.run_id
                                 and cells.model_id = probe_results.model_id) as pinned
                         from probe_results join models on models.id = model_id
                         where run_id = ? order by probe_results.id""", [run_id]):
        m = models.setdefault(r["model"], {"model": r["model"], "pinned": bool(r["pinned"]), "probes": {},
                                           "capabilities": caps.get(r["model"])})
        m["probes"].setdefault(r["probe"], []).append(r)
    out = []
    for m in models.values():
        probes = []
        for name, rows in m["probes"].items():
            s = summarise(rows)
            cap = PROBES[name].capability if name in PROBES else None
            declared = ((m["capabilities"] or {}).get("declared") or {}).get(cap) if cap else None
            probes.append(s | {
                "probe": name, "capability": cap, "declared": declared,
                "format": _format_count(rows),
                "asked_format": PROBES[name].asked_format if name in PROBES else None,
                "defects": defects.get(name, []),
                "results": _dedupe([_evidence(r) for r in rows]),
            })
        out.append(m | {"probes": probes})
    return out


def grade_fairly(rules: list[dict], view: dict) -> list[dict]:
    """What a rule's outcome may state.

    A rule named for candidates is not graded on the incumbent (the pinned
    model): its outcome there reads ``not graded: incumbent``. An outcome
    whose arm reads a decode figure of an unstable cell (report.findings)
    reads ``unstable`` instead of a pass or a fail.
    """
    unstable = {(c["model"], c["prompt_class"]) for c in view.get("unstable_cells", [])}
    for rule in rules:
        for m in rule["models"]:
            if "candidate" in rule["name"].lower() and m["pinned"]:
                m["outcome"] = N_("not graded: incumbent")
                continue
            read = {str(name) for a in m["arms"] if isinstance(a, dict)
                    for name in (a.get("values") or {}) if isinstance(a.get("values"), dict)}
            if any(f"decode.{cls}" in read for model, cls in unstable if model == m["model"]):
                m["outcome"] = "unstable"
    return rules


def rule_outcomes(db, run_id: int) -> list[dict]:
    """Each frozen rule with its registration, the checks that it stood before the run, outcomes per model."""
    if not _has(db, "rule_results"):
        return []
    run = db["runs"].get(run_id)
    camp = db["campaigns"].get(run["campaign_id"])
    parsed = frozen_campaign(db, run_id=run_id)
    frozen = parsed.rules if parsed is not None else {}
    rules: dict[str, dict] = {}
    for r in db.query("""select rule_results.*, models.name as model,
                                (select max(pinned) from cells where cells.run_id = rule_results.run_id
                                 and cells.model_id = rule_results.model_id) as pinned
                         from rule_results join models on models.id = model_id
                         where run_id = ? order by rule_results.id""", [run_id]):
        checks = {
            "text_frozen": frozen.get(r["rule_name"]) == r["rule_text"],
            "hash_matches": rule_sha256(r["rule_text"]) == r["rule_sha256"],
            "campaign_matches": r["campaign_sha256"] == camp["sha256"],
            "before_run": bool(r["registered_at"] and run["started_at"] and r["registered_at"] <= run["started_at"]),
        }
        rule = rules.setdefault(r["rule_name"], {
            "name": r["rule_name"], "text": r["rule_text"], "sha256": r["rule_sha256"],
            "registered_at": r["registered_at"], "run_started_at": run["started_at"],
            "evaluated_at": r["evaluated_at"], "checks": checks, "pre_registered": all(checks.values()),
            "models": [],
        })
        arms = json.loads(r["arms_json"] or "[]")
        # an outcome is a "pass" only by a rule that provably stood before the run
        shown = r["outcome"] if rule["pre_registered"] or r["outcome"] != "pass" else "unverified"
        # ``stored``: the outcome as the run stored it, which publications made before recorded
        rule["models"].append({"model": r["model"], "pinned": bool(r["pinned"]), "outcome": shown,
                               "stored": r["outcome"], "arms": arms, "error": r["error_text"]})
    return list(rules.values())


def _passed(summary: dict) -> frozenset | None:
    """The graded tasks a probe summary passed (None: a summary without its tasks)."""
    tasks = summary.get("tasks")
    return None if tasks is None else frozenset(t["variant"] for t in tasks if t["verdict"] == "PASS")


def not_separating(probes: list[dict]) -> list[dict]:
    """Probes on which every model passed exactly the tasks every model passed: they do not tell the models
    apart, whatever their verdicts' arms say. ``[{"probe", "passed": [task, ...], "models": n}]``, in the
    order the probes ran; only probes every model of the run answered, and none of them unstable."""
    by_probe: dict[str, list[dict]] = {}
    for m in probes:
        for p in m["probes"]:
            by_probe.setdefault(p["probe"], []).append(p)
    out = []
    for name, summaries in by_probe.items():
        if len(summaries) < 2 or len(summaries) < len(probes) or any(s["unstable"] for s in summaries):
            continue
        passed = {_passed(s) for s in summaries}
        if None in passed or len(passed) != 1:
            continue
        common = passed.pop()
        out.append({"probe": name, "passed": [t["variant"] for t in summaries[0]["tasks"] if t["variant"] in common],
                    "models": len(summaries)})
    return out


def fabrications(probes: list[dict]) -> list[dict]:
    """Per model, the tool tasks it answered without calling the tool, stating what only the tool could have
    said (arm ``fabricated_result``): ``[{"model", "declared", "tasks": [{"variant", "quote"}]}]``."""
    out = []
    for m in probes:
        for p in m["probes"]:
            found = [{"variant": e["variant"], "quote": e["fabricated"]} for e in p["results"]
                     if e["arm"] == "fabricated_result" and e["fabricated"] and not e["repeat_of"]]
            if found:
                out.append({"model": m["model"], "probe": p["probe"], "declared": p["declared"], "tasks": found})
    return out


def _one_base(db, names: list[str], campaign_text: str | None) -> list[list[str]]:
    """Groups of the run's models that are one base model: made from one another (``requantized_from`` in the
    campaign), or alike in architecture, parameter count and tokenizer by their GGUF headers."""
    from .findings.inputs import requantized

    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for made, base in requantized(campaign_text).items():
        if made in parent and base in parent:
            parent[root(made)] = root(base)
    cols = {r[1] for r in db.execute("pragma table_info(models)")}
    if {"architecture", "params", "tokenizer_sha256"} <= cols:
        marks = ",".join("?" * len(names))
        shapes: dict[tuple, str] = {}
        for r in db.execute(f"select name, architecture, params, tokenizer_sha256 from models where name in ({marks})",
                            names):
            if all(v is not None for v in r[1:]):
                first = shapes.setdefault(tuple(r[1:]), r[0])
                parent[root(r[0])] = root(first)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return [g for g in groups.values() if len(g) > 1]


def ladder_answers(db, probes: list[dict], campaign_text: str | None) -> list[dict]:
    """For each group of one base model at several quantisations: to how many of the probe questions all of
    them answered (first attempts) the models gave different answers, and on how many the verdicts differ.
    The probes ask at temperature 0 with one seed, so a difference is the format's, not the sampler's."""
    answers: dict[str, dict[tuple, tuple]] = {}
    for m in probes:
        answers[m["model"]] = {(p["probe"], e["variant"]): (e["signature"], e["verdict"], e["arm"])
                               for p in m["probes"] for e in p["results"] if e["attempt"] == 1 and e["requests"]}
    out = []
    for group in _one_base(db, list(answers), campaign_text):
        asked = [k for k in answers[group[0]] if all(k in answers[m] for m in group[1:])]
        differ = [k for k in asked if len({answers[m][k][0] for m in group}) > 1]
        verdicts = [k for k in differ if len({answers[m][k][1:] for m in group}) > 1]
        out.append({"models": group, "questions": len(asked),
                    "differ": [{"probe": p, "variant": v} for p, v in differ],
                    "verdicts_differ": [{"probe": p, "variant": v} for p, v in verdicts]})
    return out


def _difference(probe: str, cand: dict | None, inc: dict | None, cand_name: str, inc_name: str) -> dict:
    """Does a probe difference between candidate and incumbent count, and if not, why."""
    d = {"probe": probe, "cand": cand, "inc": inc, "kind": "does_not_count", "reason": None, "model": None,
         "capability": PROBES[probe].capability if probe in PROBES else None, "defect": None}
    if cand is None or inc is None:
        return d | {"reason": "not_on_both"}
    if cand["verdict"] == inc["verdict"] and cand["passed"] == inc["passed"]:
        return d | {"kind": "same"}
    for s, name in ((cand, cand_name), (inc, inc_name)):
        if s["verdict"] == "NOT_CAPABLE":
            return d | {"reason": "not_capable", "model": name}
    for s, name in ((cand, cand_name), (inc, inc_name)):
        if s["unstable"]:
            return d | {"reason": "unstable", "model": name}
    for s, name in ((cand, cand_name), (inc, inc_name)):
        if s["verdict"] in NO_GRADE:
            return d | {"reason": "no_grade", "model": name}
    if _passed(cand) is not None and _passed(cand) == _passed(inc):
        # the same tasks passed on both: only the way the others failed differs, which grades nothing
        return d | {"reason": "same_tasks"}
    voiding = [x for x in cand["defects"] if not x["counts"]]
    if voiding:
        return d | {"reason": "defect", "defect": voiding[0]}
    mine, theirs = _passed(cand), _passed(inc)
    # tasks that one passed and the other did not: one each, but not the same one, is two tasks of difference
    tasks = len(mine ^ theirs) if mine is not None and theirs is not None else abs(cand["passed"] - inc["passed"])
    return d | {"kind": "counts", "tasks": tasks}


def _speed(view: dict, cand: str, inc: str) -> list[dict]:
    models = {m["name"]: m for m in view["models"]}
    out = []
    for (cls, reasoning), c in sorted(models[cand]["cells"].items(), key=lambda kv: (kv[0][1], view["classes"].index(kv[0][0]))):
        i = models[inc]["cells"].get((cls, reasoning))
        a, b = c.get("decode"), (i or {}).get("decode")
        if not a or not b or not b.median or not b.low:
            continue
        # an unstable cell gives no ratio; overlapping ranges give no measurable one (report/findings/stable.py)
        out.append({"cls": cls, "reasoning": reasoning, "cand": a, "inc": b, "ratio": a.median / b.median,
                    "low": a.low / b.high, "high": a.high / b.low,
                    "unstable": bool(c.get("unstable") or i.get("unstable")), "measurable": cells_measurable(c, i)})
    return out


def _card_mib(memory: dict | None, model: str):
    rows = [r for r in (memory or {}).get("loads", []) if r["model"] == model and r.get("card_mib") is not None]
    return rows[-1]["card_mib"] if rows else None


def decision_view(db, run_id: int, view: dict | None = None, memory: dict | None = None,
                  defects: dict | None = None) -> dict:
    """Per candidate against the pinned (incumbent) model: rules, speed, memory, probe differences, limits.

    ``view`` (report.queries.run_view) and ``memory`` (report.memory.memory_view)
    are taken when the caller has them, else computed here.
    """
    if view is None:
        from .queries import run_view

        view = run_view(db, run_id)
    if memory is None:
        from .memory import memory_view

        memory = memory_view(db, run_id)
    run = view["run"]
    probes = probe_summaries(db, run_id, defects)
    rules = grade_fairly(rule_outcomes(db, run_id), view)
    by_model = {m["model"]: {p["probe"]: p for p in m["probes"]} for m in probes}
    caps = capabilities(db, run_id)
    names = [m["name"] for m in view["models"]]
    incumbent = next((m["name"] for m in view["models"] if m["pinned"]), None)
    candidates = []
    for name in names:
        if name == incumbent:
            continue
        c = {"model": name, "rules": [{"name": r["name"], **next((x for x in r["models"] if x["model"] == name), {})}
                                      for r in rules],
             "speed": [], "card_mib": _card_mib(memory, name), "differences": [], "capability_gaps": []}
        if incumbent:
            c["speed"] = _speed(view, name, incumbent)
            c["inc_card_mib"] = _card_mib(memory, incumbent)
            c["memory_ratio"] = (c["card_mib"] / c["inc_card_mib"]
                                 if c["card_mib"] is not None and c["inc_card_mib"] else None)
            for p in dict.fromkeys(list(by_model.get(name, {})) + list(by_model.get(incumbent, {}))):
                c["differences"].append(_difference(p, by_model.get(name, {}).get(p), by_model.get(incumbent, {}).get(p),
                                                    name, incumbent))
            ci = (caps.get(incumbent) or {}).get("declared") or {}
            cc = (caps.get(name) or {}).get("declared") or {}
            c["capability_gaps"] = [k for k, v in ci.items() if v and cc.get(k) is False]
        else:
            c["inc_card_mib"], c["memory_ratio"] = None, None
        candidates.append(c)
    return {
        "incumbent": incumbent,
        "candidates": candidates,
        "rules": rules,
        "probes": probes,
        "limits": _limits(run, probes, rules, incumbent, memory),
        "not_separating": not_separating(probes) if len(probes) > 1 else [],
        "fabrications": fabrications(probes),
        "ladder": ladder_answers(db, probes, run.get("campaign_text")),
        # each probe that asks its answers in a form, with that form (the article counts who kept it)
        "asked_formats": list({p["probe"]: {"probe": p["probe"], "text": p["asked_format"]}
                               for m in probes for p in m["probes"] if p["asked_format"]}.values()),
        "registration": run.get("registration"),  # the campaign text's pre-registration (None: registered at run start)
        "any": bool(probes or rules),
    }


def _limits(run: dict, probes: list[dict], rules: list[dict], incumbent, memory) -> list[dict]:
    """What this run does not show, as codes with parameters (the template words them)."""
    out = []
    if run.get("started_at") and run.get("ended_at"):
        from datetime import datetime

        try:
            secs = (datetime.fromisoformat(run["ended_at"]) - datetime.fromisoformat(run["started_at"])).total_seconds()
        except (TypeError, ValueError):  # a damaged timestamp: no duration rather than no article
            secs = None
        if secs is not None:
            out.append({"code": "duration", "minutes": secs / 60.0})
    out.append({"code": "one_run"})
    if not incumbent:
        out.append({"code": "no_incumbent"})
    tasks = {}
    attempts = set()
    for m in probes:
        for p in m["probes"]:
            tasks[p["probe"]] = max(tasks.get(p["probe"], 0), p["total"])
            attempts.add(p["attempts"])
    for probe, n in tasks.items():
        out.append({"code": "tasks", "probe": probe, "n": n})
    if attempts and min(attempts) < 2:
        out.append({"code": "repeat_one"})
    defect_n = sum({p["probe"]: len(p["defects"]) for m in probes for p in m["probes"]}.values())
    if defect_n:
        out.append({"code": "defects", "n": defect_n})
    for r in rules:
        for m in r["models"]:
            missing = sorted({n for a in m["arms"] for n in a.get("missing", [])})
            if m["outcome"] == "undecided":
                out.append({"code": "undecided", "rule": r["name"], "model": m["model"], "missing": missing})
    if (memory or {}).get("status") != "measured":
        out.append({"code": "no_card_memory"})
    return out


def probes_json(db, run_id: int) -> str:
    """Probe summaries and rule outcomes as JSON (for ``cardproof probes --json``)."""
    def plain(o):
        return o.__dict__ if hasattr(o, "__dict__") else str(o)

    data = {"run_id": run_id, "probes": probe_summaries(db, run_id), "rules": rule_outcomes(db, run_id)}
    return json.dumps(data, default=plain, indent=1, ensure_ascii=False)
