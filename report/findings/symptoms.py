"""Same symptom, different cause: one cell that failed the same way more than once, for different reasons.

"The same cell crashed twice" reads as one bug repeated; where the server's
own words differ (a SIGILL once, an out-of-memory kill the next time; a
refused connection, then a cut-off answer), it is two, and a reader who
fixes one still has the other. A request's cause is the crash of the server
process that served it where the log says so, else its error text (numbers
of four digits or more and addresses masked, so that a port or a pid does not
make two causes of one).
"""

from __future__ import annotations

import re
from datetime import datetime

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Quote, Term

TITLE = N_("Same symptom, different causes: {model}")
TEXT = N_("In the prompt class {cls}, {n} requests to {model} failed with the same symptom ({kind}), from {k} different "
          "causes: they are not one fault repeated.")
CAUSE = N_("{cause}: {count}× (samples {samples})")
CAUSE_CRASH = N_("{cause}, as the server's log says it (line {line}): {count}× (samples {samples})")
CONDITION = N_("One cell failed the same way at least twice, and the error texts or the server's crash lines differ.")
CAVEAT = N_("Causes are told apart by their words: two texts can still share one root cause (a driver fault seen by the "
            "client and by the server), and one text can hide two.")

_NOISE = re.compile(r"0x[0-9a-fA-F]+|\d{4,}")


def _when(text):
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def _serving_crash(sample: dict, model: str, crashes: list[dict]):
    """The crashed load of ``model`` that was up when the request started, if the store knows one."""
    t = _when(sample.get("started_at"))
    if t is None:
        return None
    for c in crashes:
        start, end = _when(c.get("requested_at")), _when(c.get("ended_at"))
        if c.get("model") != model or start is None:
            continue
        try:
            if start <= t and (end is None or t <= end):
                return c
        except TypeError:  # one time with a zone, one without: no comparison
            continue
    return None


def check(view: dict) -> list[Finding]:
    crashes = view.get("crashes") or []
    out = []
    for cell in view["cells"]:
        by_kind: dict[str, list[dict]] = {}
        for s in cell.get("errors") or []:
            by_kind.setdefault(s["error_kind"], []).append(s)
        for kind, failed in by_kind.items():
            if len(failed) < 2:
                continue
            causes: dict[tuple, dict] = {}
            for s in failed:
                crash = _serving_crash(s, cell["model"], crashes)
                if crash and crash.get("end_reason"):
                    key = ("crash", crash["end_reason"])
                    entry = causes.setdefault(key, {"text": crash["end_reason"], "line": crash.get("line_id"),
                                                     "samples": []})
                else:
                    text = " ".join(str(s.get("error_text") or "").split())[:200]
                    key = ("text", _NOISE.sub("#", text))
                    entry = causes.setdefault(key, {"text": text, "line": None, "samples": []})
                entry["samples"].append(s["id"])
            if len(causes) < 2:
                continue
            figures = tuple(
                Line(CAUSE_CRASH if c["line"] else CAUSE,
                     {"cause": Quote(c["text"]), "count": len(c["samples"]),
                      "samples": [Fig(i, "int", link=f"sample-{i}") for i in c["samples"]]}
                     | ({"line": Fig(c["line"], "int", link=f"line-{c['line']}")} if c["line"] else {}))
                for c in causes.values())
            params = {"cls": Term(cell["prompt_class"]), "n": len(failed), "model": cell["model"],
                      "kind": Quote(kind), "k": len(causes)}
            out.append(Finding("symptoms", f"symptoms:{cell['model']}|{cell['prompt_class']}|"
                                           f"{int(bool(cell['reasoning']))}|{kind}",
                               TITLE, TEXT, params, figures, Line(CONDITION), Line(CAVEAT)))
    return out


RULE = FindingRule("symptoms", check, order=60)
