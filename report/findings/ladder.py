"""Quantisation ladder: one base model at several quantisations, its speed and memory per step.

A ladder says what a format costs only where nothing else changes between
its steps: the same architecture, the same parameter count and the same
tokenizer, as the GGUF headers state them. Files of one family (the header's
base name) that differ in any of these are named as an uncontrolled ladder,
and no effect per bit is stated from them: "Q4_K_M of one upload against
Q8_0 of another" measures two models.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Term
from .pick import bits_per_weight, card_rows, cell_of, number, shape, stable_cell
from .stable import cells_measurable

TITLE = N_("Quantisation ladder")
TEXT = N_("{models} are one base model ({params} parameters, one tokenizer) at {n} quantisations. In the prompt "
          "class {cls}, from {top} to {bottom}, {memory} goes from {mem_top} to {mem_bottom} and decode from "
          "{tps_top} to {tps_bottom} tok/s ({ratio}).")
TEXT_FLAT = N_("{models} are one base model ({params} parameters, one tokenizer) at {n} quantisations. In the "
               "prompt class {cls}, from {top} to {bottom}, {memory} goes from {mem_top} to {mem_bottom}; decode "
               "shows no measurable difference ({tps_top} and {tps_bottom} tok/s).")
CARD = N_("the memory on the card")
FILE = N_("the file")
STEP = N_("{hi} ({hi_q}) → {lo} ({lo_q}): decode {hi_tps} → {lo_tps} tok/s, {ratio}; {memory} {hi_mem} → {lo_mem}")
NOT_MEASURABLE = N_("no measurable difference in decode")
LEFT_OUT = N_("{model} ({quant}): no step of the ladder, its cell is unstable ({low} to {high} tok/s)")
CONDITION = N_("The GGUF headers give every step the same architecture, parameter count and tokenizer; a step's decode "
               "is given as a ratio only where it differs beyond the samples' scatter, from stable cells.")
CAVEAT = N_("Speed and memory only: what each step costs in the quality of the answers is not measured here, and a "
            "format's speed depends on this build's kernels for this machine.")
CAVEAT_QUALITY = N_("Speed and memory here: what each step costs in the answers is measured in the finding Quality "
                    "beside speed. A format's speed depends on this build's kernels for this machine.")
CAVEAT_REQUANTIZED = N_("Requantized from {base}, with its weights: {models}. The ladder shows what each format "
                        "costs in speed and memory, not what it costs in quality. A format's speed depends on this "
                        "build's kernels for this machine.")
CAVEAT_REQUANTIZED_QUALITY = N_("Requantized from {base}, with its weights: {models}. The ladder shows what each format "
                                "costs in speed and memory; what quantising the original model cost in the answers "
                                "cannot be read from files that share one set of weights (the finding Quality beside "
                                "speed measures only the rounding between these formats). A format's speed depends on "
                                "this build's kernels for this machine.")

TITLE_MIXED = N_("Quantisation ladder not controlled")
TEXT_MIXED = N_("{models} look like one ladder of {family} at {quants}, but their base models differ ({differs}): the "
                "ladder is not controlled, and no effect per bit is stated from it.")
ARCHITECTURE = N_("architecture")
PARAMETERS = N_("parameter count")
TOKENIZER = N_("tokenizer")
MEMBER = N_("{model}: {quant}, architecture {arch}, {params} parameters, tokenizer {tokenizer}")
CONDITION_MIXED = N_("The GGUF headers name these files one family ({family}) and give them different base models.")
CAVEAT_MIXED = N_("A controlled ladder needs the same architecture, parameter count and tokenizer at every step; across "
                  "these files, what the format changes is mixed with what the base model changes.")


def _family(s: dict):
    name = (s.get("basename") or "").strip().lower()
    return ("name", name) if name else ("arch", s.get("architecture"), s.get("params"))


def _base(s: dict):
    return s.get("architecture"), s.get("params"), s.get("tokenizer_sha256")


def check(view: dict) -> list[Finding]:
    if not view.get("classes"):
        return []
    families: dict = {}
    for m in view["models"]:
        s = shape(view, m["name"])
        if number(s.get("params")) and s.get("quantisation") and s.get("tokenizer_sha256"):
            families.setdefault(_family(s), []).append({"model": m, "shape": s})
    out = []
    for members in families.values():
        if len({r["shape"]["quantisation"] for r in members}) < 2:
            continue
        bases: dict = {}
        for r in members:
            bases.setdefault(_base(r["shape"]), []).append(r)
        if len(bases) > 1:
            out.append(_mixed(members, bases))
        for steps in bases.values():
            if len({r["shape"]["quantisation"] for r in steps}) > 1:
                found = _ladder(view, _class(view, steps), steps)
                if found:
                    out.append(found)
    return out


def _class(view: dict, members: list[dict]) -> str:
    """The prompt class where most steps of the ladder are stable, the first of those: a step unstable in one
    class (a busy machine's moment) need not shorten the ladder where the others hold it."""
    return max(view["classes"], key=lambda c: (sum(1 for r in members if stable_cell(r["model"], c)),
                                               -view["classes"].index(c)))


def _ladder(view: dict, cls: str, members: list[dict]) -> Finding | None:
    """One base model's steps, most bits first; a model whose cell is unstable is no step of it."""
    steps = [r | {"cell": stable_cell(r["model"], cls)} for r in members]
    unstable = [r for r in steps if not r["cell"] and (cell_of(r["model"], cls) or {}).get("decode")]
    steps = [r for r in steps if r["cell"]]
    # one step per quantisation: a second file of one format (the same file under two names, a server
    # variant measured as a model of its own) is no step down the ladder
    first: dict = {}
    for r in steps:
        first.setdefault(r["shape"]["quantisation"], r)
    steps = list(first.values())
    if len(steps) < 2:
        return None
    steps.sort(key=lambda r: (-(bits_per_weight(r["shape"]) or 0), r["model"]["name"]))
    cards = card_rows(view)
    on_card = all(r["model"]["name"] in cards for r in steps)
    for r in steps:
        row = cards.get(r["model"]["name"])
        r["mem"] = Fig(row["card_mib"], "mib", link=f"fig-load-{row['load_id']}") if on_card else \
            Fig(r["shape"]["file_bytes"] / 2**20 if number(r["shape"].get("file_bytes")) else None, "mib")
        r["tps"] = Fig(r["cell"]["decode"].median, link=f"cell-{r['cell']['id']}")
    memory = Term(CARD if on_card else FILE)

    def ratio(hi: dict, lo: dict):
        if not cells_measurable(hi["cell"], lo["cell"]):
            return Term(NOT_MEASURABLE)
        return Fig(lo["cell"]["decode"].median / hi["cell"]["decode"].median, "ratio")

    figures = tuple(Line(STEP, {"hi": hi["model"]["name"], "hi_q": hi["shape"]["quantisation"],
                                "lo": lo["model"]["name"], "lo_q": lo["shape"]["quantisation"],
                                "hi_tps": hi["tps"], "lo_tps": lo["tps"], "ratio": ratio(hi, lo), "memory": memory,
                                "hi_mem": hi["mem"], "lo_mem": lo["mem"]})
                    for hi, lo in zip(steps, steps[1:]))
    for r in unstable:  # said, so that a ladder shorter than the campaign's is not read as the whole
        c = cell_of(r["model"], cls)
        figures += (Line(LEFT_OUT, {"model": r["model"]["name"], "quant": r["shape"]["quantisation"],
                                    "low": Fig(c["decode"].low, link=f"cell-{c['id']}"),
                                    "high": Fig(c["decode"].high)}),)
    top, bottom = steps[0], steps[-1]
    names = [r["model"]["name"] for r in steps]
    params = {"models": names, "params": Fig(top["shape"]["params"], "params"), "n": len(steps), "cls": Term(cls),
              "top": top["shape"]["quantisation"], "bottom": bottom["shape"]["quantisation"], "memory": memory,
              "mem_top": top["mem"], "mem_bottom": bottom["mem"], "tps_top": top["tps"], "tps_bottom": bottom["tps"]}
    measured = cells_measurable(top["cell"], bottom["cell"])
    if measured:
        params["ratio"] = ratio(top, bottom)
    made = view.get("requantized") or {}
    sources = {made[n] for n in names if n in made}  # the source may itself be left out as unstable
    if sources:
        caveat = Line(CAVEAT_REQUANTIZED_QUALITY if _quality_measured(view, names) else CAVEAT_REQUANTIZED,
                      {"models": [n for n in names if n in made], "base": sorted(sources)})
    elif _quality_measured(view, names):
        caveat = Line(CAVEAT_QUALITY)
    else:
        caveat = Line(CAVEAT)
    return Finding("ladder", "ladder:" + "|".join(sorted(names)), TITLE, TEXT if measured else TEXT_FLAT, params,
                   figures, Line(CONDITION), caveat)


def _quality_measured(view: dict, names: list[str]) -> bool:
    """Whether ``[quality]`` measured a step of this ladder against another (report/quality.py)."""
    for ladder in (view.get("quality") or {}).get("ladders", []):
        measured = {e["model"] for e in ladder["rows"] if e["status"] == "measured" and e["role"] == "member"}
        if measured & set(names) and ladder["base"] in names:
            return True
    return False


def _mixed(members: list[dict], bases: dict) -> Finding:
    keys = list(bases)
    differs = [Term(word) for i, word in ((0, ARCHITECTURE), (1, PARAMETERS), (2, TOKENIZER))
               if len({k[i] for k in keys}) > 1]
    members = sorted(members, key=lambda r: r["model"]["name"])
    # the base name as the first file's header spells it (files are grouped by it case-blind)
    name = (members[0]["shape"].get("basename") or "").strip() or members[0]["shape"].get("architecture") or "?"
    figures = []
    for r in members:
        s, cells = r["shape"], r["model"]["cells"]
        first = min((c["id"] for c in cells.values()), default=None)
        figures.append(Line(MEMBER, {"model": r["model"]["name"], "quant": s["quantisation"],
                                     "arch": s.get("architecture") or "—",
                                     "params": Fig(s["params"], "params", link=f"cell-{first}" if first else None),
                                     "tokenizer": s["tokenizer_sha256"][:12]}))
    return Finding("ladder", "ladder-mixed:" + "|".join(r["model"]["name"] for r in members), TITLE_MIXED,
                   TEXT_MIXED, {"models": [r["model"]["name"] for r in members], "family": name,
                                "quants": sorted({r["shape"]["quantisation"] for r in members}),
                                "differs": differs},
                   tuple(figures), Line(CONDITION_MIXED, {"family": name}), Line(CAVEAT_MIXED))


RULE = FindingRule("ladder", check, order=20)
