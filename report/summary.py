"""The article's summary: the conclusion first, in five to eight sentences made from the view and the findings.

What was measured, the result per prompt class in decode and in prefill (with
the time to the first token), what the pass rules decided and what that rests
on, kept apart from whether a candidate is worth adopting, and the caveat that
limits the whole run most. Like a finding rule it returns message ids with
values (``Line``, ``Fig``, ``Term``), never text: every figure is one that
another section of the article prints, formatted and linked the same way
(decode medians as the main table, prefill and time to first token as its
prefill table, rule values as the Decision table), so a reader can follow each
number to the row it comes from. Each message's German is in the catalogue.

In short, ``summary.py``: the article's summary, first under its title: the
conclusion in five to eight sentences (what was measured; decode and prefill with the time to the
first token per prompt class, a model named only where it is measurably ahead of every other; the
pass rules' outcomes with the values they read, apart from whether a passing candidate is worth
adopting: where it trails the pinned model measurably; the main caveat), as message ids and values
like a finding (German in the ``.po``), each figure formatted and linked as the section that shows
it (``article_parts.summary_paragraph`` says it)
"""

from __future__ import annotations

from dataclasses import dataclass

from cardproof.marks import N_, NP_

from .figures import rule_digits
from .findings.base import Fig, Line, Term
from .findings.pick import cell_of, spread_unstable, stable_cell
from .findings.stable import cells_measurable, measurable

SECTION = "Summary"

WHAT_CPU = NP_("This run measured {models} on the CPU alone (no GPU seen), served by {server}, in the prompt classes "
               "{classes} with {reps} sample per cell, one request at a time.",
               "This run measured {models} on the CPU alone (no GPU seen), served by {server}, in the prompt classes "
               "{classes} with {reps} samples per cell, one request at a time.")
WHAT_CPU_NAMED = NP_("This run measured {models} on the CPU alone ({cpu}, {cpus} CPUs usable by the run, no GPU "
                     "seen), served by {server}, in the prompt classes {classes} with {reps} sample per cell, one "
                     "request at a time.",
                     "This run measured {models} on the CPU alone ({cpu}, {cpus} CPUs usable by the run, no GPU "
                     "seen), served by {server}, in the prompt classes {classes} with {reps} samples per cell, one "
                     "request at a time.")
WHAT_GPU = NP_("This run measured {models} on {gpus}, served by {server}, in the prompt classes {classes} with {reps} "
               "sample per cell, one request at a time.",
               "This run measured {models} on {gpus}, served by {server}, in the prompt classes {classes} with {reps} "
               "samples per cell, one request at a time.")
NOT_FINISHED = NP_("This run did not finish ({measured} of {planned} sample measured), so it states no conclusion: its "
                   "numbers are from an unfinished run.",
                   "This run did not finish ({measured} of {planned} samples measured), so it states no conclusion: "
                   "its numbers are from an unfinished run.")
NOTHING = N_("This run has no valid sample, so it states no conclusion.")

DECODE_ALL = (N_("Decode: {model} is the fastest in every prompt class, measurably ahead of every other model (median "
                 "tok/s: {figures})."))
DECODE_SOME = (N_("Decode, the model measurably ahead of every other per prompt class: {leaders} (median tok/s: "
                  "{figures})."))
DECODE_NONE = (N_("Decode: in no prompt class is one model measurably ahead of every other (median tok/s: {figures})."))
PREFILL_ALL = (N_("Prefill: {model} reads prompts the fastest in every prompt class, measurably ahead of every other "
                  "model (median tok/s, in brackets the median time to the first token: {figures})."))
PREFILL_SOME = (N_("Prefill, the model measurably ahead of every other per prompt class: {leaders} (median tok/s, in "
                   "brackets the median time to the first token: {figures})."))
PREFILL_NONE = (N_("Prefill: in no prompt class is one model measurably ahead of every other (median tok/s, in brackets "
                   "the median time to the first token: {figures})."))
LEADER = N_("{cls} {model}")
NO_LEADER = N_("{cls} none")
CLASS_FIGURES = N_("{cls}: {figures}")
FIGURE = N_("{model} {value}")
FIGURE_UNSTABLE = N_("{model} {value} (unstable)")
FIGURE_TTFT = N_("{model} {value} ({ttft} ms)")
SWAP_ALL = (N_("So {model} answers the fastest but reads prompts the slowest, measurably in both: with long prompts and "
               "short answers it is the slower choice."))
SWAP_SOME = (N_("In {classes}, {model} answers the fastest but reads prompts the slowest, measurably in both: with long "
                "prompts and short answers it is the slower choice."))

RULE = N_("By the pass rule {rule} ({text}), fixed {when}: {outcomes}.")
FIXED_BEFORE = N_("before the run")
FIXED_AT_START = N_("when the run started")
OUTCOME = N_("{model}: {outcome} ({values})")
OUTCOME_BARE = N_("{model}: {outcome}")
VALUE = N_("{name} = {value}")
NO_RULE = N_("No pass rule was set before this run: it ranks the models, it decides nothing.")
WORTH_BEHIND = (N_("Passing the rule is not the same as being worth adopting: the rule weighs only {read}, and where "
                   "it does not look {behind}."))
BEHIND = N_("{model} is measurably behind {incumbent} in {metric} of the class {cls} ({value} against {other} tok/s)")
WORTH_NOT_BEHIND = (N_("Passing the rule is not the same as being worth adopting: the rule weighs only {read}; of the "
                       "other decode and prefill figures of this run, none puts {models} measurably behind {incumbent}; "
                       "and what the run did not measure (answers beyond the probes, sustained load) is weighed by "
                       "nobody."))
WORTH_NONE_PASS = N_("No candidate passes the rule, so nothing in this run argues for replacing {incumbent}.")
WORTH_UNDECIDED = (N_("No candidate passes the rule here, and it is not judged where its figures are missing or come from "
                      "unstable cells: this run decides nothing about replacing {incumbent}."))

CAVEAT_BUSY = NP_("Main caveat: the machine had more work than CPUs during the run (load average over one minute "
                  "{start} at its start and {end} at its end, on {cpus} CPU), so other processes took time from the "
                  "server and every rate above is lower than this machine gives when idle.",
                  "Main caveat: the machine had more work than CPUs during the run (load average over one minute "
                  "{start} at its start and {end} at its end, on {cpus} CPUs), so other processes took time from the "
                  "server and every rate above is lower than this machine gives when idle.")
CAVEAT_REQUANTIZED = (N_("Main caveat: {models} were made from {base} with llama-quantize and carry its weights, so this "
                         "ladder shows what each format costs in speed, not in quality."))
CAVEAT_UNSTABLE = (N_("Main caveat: some cells were too unsteady to state anything from ({cells}); they are left out of "
                      "every statement above."))
CAVEAT_ONE_RUN = (N_("Main caveat: one run of {minutes} minutes on one machine: every range above is over its samples, "
                     "not over days or configurations."))

#: how many "behind" items one sentence names (the rest is in the Decision section)
MAX_BEHIND = 3


@dataclass(frozen=True)
class Code:
    """Text from data shown as code, as the Decision section shows it (a rule's text)."""

    text: str


@dataclass(frozen=True)
class Seq:
    """Values said one after the other with ``sep`` between them (a clause list inside a sentence)."""

    items: tuple
    sep: str = ", "


def summary_lines(view: dict) -> list[Line]:
    """The summary's sentences for one run view (the article's, findings and decision included)."""
    run = view["run"]
    if run.get("status") != "completed":
        return [Line(NOT_FINISHED, {"measured": Fig(run.get("samples_measured"), "int"),
                                    "planned": Fig(run.get("samples_planned"), "int")}, count="planned")]
    models = view.get("models") or []
    if not any(c.get("decode") for m in models for c in m["cells"].values()):
        return [Line(NOTHING)]
    out = [_what(view)]
    out.append(_metric(view, "decode"))
    out.append(_metric(view, "prefill"))
    swap = _swap(view)
    if swap:
        out.append(swap)
    out.extend(_decision(view))
    out.append(_caveat(view))
    return out


def _what(view: dict) -> Line:
    lead = view.get("lead") or {}
    reps = sorted(set(lead.get("repetitions") or []))
    params = {"models": Seq(tuple(m["name"] for m in view["models"])),
              "server": lead.get("backend") or view["run"].get("backend") or "—",
              "classes": Seq(tuple(Term(c) for c in view["classes"])),
              "reps": Seq(tuple(Fig(n, "int") for n in reps), "/") if reps else "—",
              # the noun agrees with the one repetition count; several ("3/5") take the plural
              "reps_n": reps[0] if len(reps) == 1 else None}
    gpus = (view.get("gpus") or {}).get("gpus") or []
    setup = view.get("setup") or {}
    if not gpus and setup.get("cpu_model") and setup.get("usable_cpus"):
        # as the Setup section names them
        return Line(WHAT_CPU_NAMED, params | {"cpu": setup["cpu_model"], "cpus": Fig(setup["usable_cpus"], "int")})
    if not gpus:
        return Line(WHAT_CPU, params)
    return Line(WHAT_GPU, params | {"gpus": Seq(tuple(g.get("name") or "?" for g in gpus))})


def _cells(view: dict, cls: str) -> list[tuple[dict, dict]]:
    return [(m, c) for m in view["models"] if (c := cell_of(m, cls)) and c.get("decode")]


def _values(cell: dict, key: str) -> list[float]:
    return [s[key] for s in cell.get("valid") or [] if isinstance(s.get(key), (int, float))]


def _stable(view: dict, cell: dict, metric: str) -> bool:
    if cell.get("unstable"):
        return False
    return metric == "decode" or (cell.get("prefill") is not None and not spread_unstable(cell["prefill"], view))


def _ahead(view: dict, a: dict, b: dict, metric: str) -> bool:
    """``a`` measurably above ``b`` in ``metric`` (both stable there)."""
    if not (_stable(view, a, metric) and _stable(view, b, metric)):
        return False
    if metric == "decode":
        return a["decode"].median > b["decode"].median and cells_measurable(a, b)
    return a["prefill"].median > b["prefill"].median and measurable(
        a["prefill"], b["prefill"], _values(a, "prefill_tps"), _values(b, "prefill_tps"))


def leader(view: dict, cls: str, metric: str) -> dict | None:
    """The model measurably ahead of every other in ``metric`` in ``cls``, or None."""
    rated = [(m, c) for m, c in _cells(view, cls) if c.get(metric) is not None]
    if len(rated) < 2:
        return None
    best_m, best_c = max(rated, key=lambda mc: mc[1][metric].median)
    if all(_ahead(view, best_c, c, metric) for m, c in rated if m is not best_m):
        return best_m
    return None


def laggard(view: dict, cls: str, metric: str) -> dict | None:
    """The model measurably behind every other in ``metric`` in ``cls``, or None."""
    rated = [(m, c) for m, c in _cells(view, cls) if c.get(metric) is not None]
    if len(rated) < 2:
        return None
    last_m, last_c = min(rated, key=lambda mc: mc[1][metric].median)
    if all(_ahead(view, c, last_c, metric) for m, c in rated if m is not last_m):
        return last_m
    return None


def _figure(view: dict, model: dict, cell: dict, metric: str) -> Line:
    link = f"cell-{cell['id']}"
    if metric == "decode":
        value = Fig(cell["decode"].median, link=link)  # the main table: one decimal
        return Line(FIGURE_UNSTABLE if cell.get("unstable") else FIGURE, {"model": model["name"], "value": value})
    value = Fig(cell["prefill"].median, digits=0, link=link)  # the prefill table: whole tokens per second
    if cell.get("ttft") is None:
        return Line(FIGURE, {"model": model["name"], "value": value})
    return Line(FIGURE_TTFT, {"model": model["name"], "value": value,
                              "ttft": Fig(cell["ttft"].median, digits=0, link=link)})


def _metric(view: dict, metric: str) -> Line:
    per_class = []
    leaders = []
    for cls in view["classes"]:
        figures = tuple(_figure(view, m, c, metric) for m, c in _cells(view, cls) if c.get(metric) is not None)
        if figures:
            per_class.append(Line(CLASS_FIGURES, {"cls": Term(cls), "figures": Seq(figures)}))
        lead = leader(view, cls, metric)
        leaders.append((cls, lead))
    texts = {"decode": (DECODE_ALL, DECODE_SOME, DECODE_NONE), "prefill": (PREFILL_ALL, PREFILL_SOME, PREFILL_NONE)}
    every, some, none = texts[metric]
    params = {"figures": Seq(tuple(per_class), "; ")}
    named = {id(m): m for _cls, m in leaders if m is not None}
    if len(named) == 1 and all(m is not None for _cls, m in leaders):
        return Line(every, params | {"model": next(iter(named.values()))["name"]})
    if named:
        items = tuple(Line(LEADER, {"cls": Term(cls), "model": m["name"]}) if m else Line(NO_LEADER, {"cls": Term(cls)})
                      for cls, m in leaders)
        return Line(some, params | {"leaders": Seq(items)})
    return Line(none, params)


def _swap(view: dict) -> Line | None:
    """The model that decodes fastest and reads prompts slowest, both measurably, in some or every class."""
    by_model: dict[str, list[str]] = {}
    for cls in view["classes"]:
        fast, slow = leader(view, cls, "decode"), laggard(view, cls, "prefill")
        if fast is not None and fast is slow:
            by_model.setdefault(fast["name"], []).append(cls)
    if len(by_model) != 1:
        return None
    model, classes = next(iter(by_model.items()))
    if classes == list(view["classes"]):
        return Line(SWAP_ALL, {"model": model})
    return Line(SWAP_SOME, {"model": model, "classes": Seq(tuple(Term(c) for c in classes))})


def _rule_value(value, name: str = "", text: str = ""):
    """A rule's value as the Decision table prints it: rounded as its quantity is everywhere
    (report/figures.py), truth as true/false."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return Fig(value, digits=rule_digits(name, float(value), text))
    return "—" if value is None else str(value)


def _decision(view: dict) -> list[Line]:
    decision = view.get("decision") or {}
    rules = decision.get("rules") or []
    if not rules:
        return [Line(NO_RULE)]
    out = []
    fixed = FIXED_BEFORE if decision.get("registration") else FIXED_AT_START
    for rule in rules:
        outcomes = []
        for m in rule["models"]:
            values = tuple(Line(VALUE, {"name": str(n), "value": _rule_value(v, str(n), a.get("text") or "")})
                           for a in m.get("arms") or [] if isinstance(a, dict)
                           for n, v in (a.get("values") or {}).items())
            word = Term(m["outcome"])
            outcomes.append(Line(OUTCOME, {"model": m["model"], "outcome": word, "values": Seq(values)})
                            if values and not m.get("pinned") else
                            Line(OUTCOME_BARE, {"model": m["model"], "outcome": word}))
        out.append(Line(RULE, {"rule": rule["name"], "text": Code(rule["text"]), "when": Term(fixed),
                               "outcomes": Seq(tuple(outcomes), "; ")}))
    worth = _worth(view, rules)
    if worth:
        out.append(worth)
    return out


def _read(rules: list[dict]) -> str:
    """The figures the rules read, without the incumbent's copies: what "passing" weighed."""
    names = []
    for rule in rules:
        for m in rule["models"]:
            for a in m.get("arms") or []:
                for n in (a.get("values") or {}) if isinstance(a, dict) else ():
                    name = str(n).removeprefix("incumbent.")
                    if name not in names:
                        names.append(name)
    return ", ".join(names) or "—"


def _worth(view: dict, rules: list[dict]) -> Line | None:
    """Whether what passed is worth adopting, kept apart from the pass: where the passing candidates trail."""
    incumbent = next((m for m in view["models"] if m["pinned"]), None)
    if incumbent is None:
        return None
    passed = [m["model"] for r in rules for m in r["models"] if m["outcome"] == "pass" and not m.get("pinned")]
    passed = list(dict.fromkeys(passed))
    if not passed:
        open_ = any(m["outcome"] in ("unstable", "undecided", "unverified") for r in rules for m in r["models"]
                    if not m.get("pinned"))
        return Line(WORTH_UNDECIDED if open_ else WORTH_NONE_PASS, {"incumbent": incumbent["name"]})
    behind = []
    by_name = {m["name"]: m for m in view["models"]}
    for name in passed:
        cand = by_name.get(name)
        if cand is None:
            continue
        for metric in ("decode", "prefill"):
            for cls in view["classes"]:
                a, b = cell_of(cand, cls), cell_of(incumbent, cls)
                if not (a and b and a.get(metric) and b.get(metric)) or not _ahead(view, b, a, metric):
                    continue
                digits = 1 if metric == "decode" else 0
                behind.append((b[metric].median / a[metric].median if a[metric].median else 0, Line(BEHIND, {
                    "model": name, "incumbent": incumbent["name"], "metric": Term(metric), "cls": Term(cls),
                    "value": Fig(a[metric].median, digits=digits, link=f"cell-{a['id']}"),
                    "other": Fig(b[metric].median, digits=digits, link=f"cell-{b['id']}")})))
    read = _read(rules)
    if not behind:
        return Line(WORTH_NOT_BEHIND, {"read": read, "models": Seq(tuple(passed)), "incumbent": incumbent["name"]})
    behind.sort(key=lambda item: -item[0])  # the widest gaps first
    return Line(WORTH_BEHIND, {"read": read, "behind": Seq(tuple(line for _gap, line in behind[:MAX_BEHIND]), "; ")})


def _caveat(view: dict) -> Line:
    from .findings.inputs import requantized

    setup = view.get("setup") or {}
    if setup.get("busy") and setup.get("load_start") and setup.get("load_end"):
        # figures as the Setup section prints them: two decimals, the CPUs as a count
        return Line(CAVEAT_BUSY, {"start": Fig(setup["load_start"].get("one"), digits=2),
                                  "end": Fig(setup["load_end"].get("one"), digits=2), "cpus": Fig(setup["cpus"], "int")},
                    count="cpus")

    made = requantized(view["run"].get("campaign_text"))
    names = {m["name"] for m in view["models"]}
    ladder = {model: base for model, base in made.items() if model in names and base in names}
    if ladder:
        bases = sorted(set(ladder.values()))
        return Line(CAVEAT_REQUANTIZED, {"models": Seq(tuple(ladder)), "base": Seq(tuple(bases))})
    unstable = view.get("unstable_cells") or []
    if unstable:
        cells = tuple(Line(LEADER, {"cls": Term(c["prompt_class"]), "model": c["model"]}) for c in unstable)
        return Line(CAVEAT_UNSTABLE, {"cells": Seq(cells, "; ")})
    minutes = (view.get("lead") or {}).get("duration_s")
    return Line(CAVEAT_ONE_RUN, {"minutes": Fig(minutes / 60 if minutes is not None else None, digits=1)})

