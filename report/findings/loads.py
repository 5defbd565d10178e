"""Load costs: a model whose load takes as long as many requests, and the models evicted and loaded again.

On a card shared by several models (llama-swap, a router with a model limit)
every swap costs a load, and a load that takes as long as fifty short answers
decides the setup more than a few tok/s do. Stated where every measured load
took longer than the slowest request of the model's first prompt class by
more than the campaign's stability limit (so no scatter of the loads could
close the gap), from a stable cell; loads of canaries and probes are not
measured loads.
"""

from __future__ import annotations

from cardproof.marks import N_
from ..stats import spread
from .base import Fig, Finding, FindingRule, Line, Term
from .pick import first_class, number, stable_cell
from .stable import measurable

TITLE = N_("Load costs: {model}")
TEXT = N_("Loading {model} takes {load} s, as long as {k} requests of the prompt class {cls} ({wall} s each, median).")
TEXT_RELOADED = N_("Loading {model} takes {load} s, as long as {k} requests of the prompt class {cls} ({wall} s each, "
                   "median). The server evicted it and loaded it again during the measurement ({reloads}×), each "
                   "time at that cost.")
TEXT_RELOAD_ONLY = N_("The server evicted {model} and loaded it again during the measurement ({reloads}×; {load} s "
                      "per load, median).")
LOAD = N_("load {id} ({trigger}): {seconds}")
REQUESTS = N_("requests of {cls}: {wall} s median, {low}–{high} s, n={n}")
EXPLICIT = N_("loaded by cardproof")
INSIDE = N_("loaded inside a measured request")
CONDITION = N_("Every measured load took longer than the slowest request of the class by more than the campaign's "
               "stability limit (×{limit}), from a stable cell; canary and probe loads are not counted.")
CONDITION_RELOAD = N_("A load inside a measured request: the server had unloaded the model and loaded it again.")
CAVEAT = N_("Load time depends on whether the file was read from disk or from the page cache, which the run does not "
            "record; a server that keeps the model loaded pays it once, one that swaps models pays it on every swap.")


def _request_seconds(cell: dict) -> list[float]:
    return [s["wall_ms"] / 1000 for s in cell["valid"] if number(s.get("wall_ms"))]


def check(view: dict) -> list[Finding]:
    cls = first_class(view)
    limit = view.get("unstable_ratio") or 1.5
    out = []
    for m in view["models"]:
        loads = [ld for ld in m.get("loads", []) if ld.get("measured") and number(ld.get("load_seconds"))
                 and ld["load_seconds"] > 0]
        if not loads:
            continue
        seconds = [ld["load_seconds"] for ld in loads]
        load = spread(seconds)
        reloads = sum(1 for ld in loads if ld.get("trigger") == "inside_request")
        cell = stable_cell(m, cls) if cls else None
        walls = _request_seconds(cell) if cell else []
        wall = spread(walls)
        costly = bool(wall) and wall.high > 0 and load.low > wall.high * limit and (
            len(seconds) < 2 or measurable(load, wall, seconds, walls))
        if not costly and not reloads:
            continue
        lines = [Line(LOAD, {"id": ld["id"], "trigger": Term(INSIDE if ld.get("trigger") == "inside_request"
                                                            else EXPLICIT),
                             "seconds": Fig(ld["load_seconds"], "seconds", 2, link=f"fig-load-{ld['id']}")})
                 for ld in loads]
        params = {"model": m["name"], "load": Fig(load.median, digits=2, link=f"fig-load-{loads[0]['id']}"),
                  "reloads": reloads}
        if costly:
            lines.append(Line(REQUESTS, {"cls": Term(cls), "wall": Fig(wall.median, digits=2, link=f"cell-{cell['id']}"),
                                         "low": Fig(wall.low, digits=2), "high": Fig(wall.high, digits=2),
                                         "n": wall.n}))
            params |= {"cls": Term(cls), "wall": Fig(wall.median, digits=2, link=f"cell-{cell['id']}"),
                       "k": Fig(load.median / wall.median if wall.median else None)}
            text = TEXT_RELOADED if reloads else TEXT
            condition = Line(CONDITION, {"limit": Fig(limit, digits=2)})
        else:
            text, condition = TEXT_RELOAD_ONLY, Line(CONDITION_RELOAD)
        out.append(Finding("loads", f"load:{m['name']}", TITLE, text, params, tuple(lines), condition, Line(CAVEAT)))
    return out


RULE = FindingRule("loads", check, order=50)
