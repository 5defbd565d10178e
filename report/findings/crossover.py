"""End to end: which model answers first depends on how long the answer is.

A request's end-to-end time is its time to the first token plus the answer's
tokens at the decode rate. A model that reads prompts faster (a shorter time
to first token) and decodes slower finishes first for short answers and
second for long ones; the answer length where the two times are equal is
what a user choosing a model for a workload needs. Stated per prompt class
for pairs whose time to first token and whose decode differ measurably in
opposite directions, from stable cells, with the end-to-end time of each at
the answer length the run measured.
"""

from __future__ import annotations

import statistics

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Term
from .pick import spread_unstable, stable_cell
from .stable import cells_measurable, measurable

TITLE = N_("End to end, the order depends on the answer's length")
TEXT = N_("In the prompt class {cls}, {quick} answers first for answers up to about {tokens} tokens; beyond that "
          "{fast} finishes first, its faster decode making up for its later first token.")
PAIR = N_("{quick}: first token after {quick_ttft} ms, decode {quick_dec} tok/s; {fast}: first token after {fast_ttft} "
          "ms, decode {fast_dec} tok/s. At this run's median answer of {n} tokens: {quick_e2e} s against {fast_e2e} s.")
CONDITION = N_("Stated where the time to the first token and the decode rate differ in opposite directions beyond the "
               "samples' scatter (ranges apart and Welch's t-test at 5 %), from cells stable in both.")
CAVEAT = N_("End-to-end time here is the median time to the first token plus the answer's tokens at the median "
            "decode rate, one request at a time: it leaves out queueing and a decode rate that falls as the answer "
            "grows.")


def _values(cell: dict, key: str) -> list[float]:
    return [s[key] for s in cell["valid"] if isinstance(s.get(key), (int, float))]


def crossover_tokens(quick_ttft_ms: float, quick_tps: float, fast_ttft_ms: float, fast_tps: float) -> float | None:
    """The answer length (tokens) where both end-to-end times are equal: ttft + n / tps for each; None where
    one model is ahead at every length."""
    if not (quick_tps > 0 and fast_tps > 0) or fast_tps <= quick_tps or fast_ttft_ms <= quick_ttft_ms:
        return None
    return (fast_ttft_ms - quick_ttft_ms) / (1000 / quick_tps - 1000 / fast_tps)


def check(view: dict) -> list[Finding]:
    out = []
    for cls in view.get("classes", []):
        rows = []
        for m in view["models"]:
            c = stable_cell(m, cls)
            if c and c.get("ttft") and not spread_unstable(c["ttft"], view):
                rows.append((m["name"], c))
        for fast, cf in rows:
            for quick, cq in rows:
                if not (cf["decode"].median > cq["decode"].median and cq["ttft"].median < cf["ttft"].median):
                    continue
                if not (cells_measurable(cf, cq) and measurable(cq["ttft"], cf["ttft"], _values(cq, "ttft_ms"),
                                                                _values(cf, "ttft_ms"))):
                    continue
                n_star = crossover_tokens(cq["ttft"].median, cq["decode"].median, cf["ttft"].median,
                                          cf["decode"].median)
                if n_star is None:
                    continue
                out.append(_finding(cls, quick, cq, fast, cf, n_star))
    return out


def _finding(cls: str, quick: str, cq: dict, fast: str, cf: dict, n_star: float) -> Finding:
    answers = _values(cq, "generated_tokens") + _values(cf, "generated_tokens")
    n = statistics.median(answers) if answers else 0

    def e2e(c: dict) -> float:
        return (c["ttft"].median + n * 1000 / c["decode"].median) / 1000

    figure = Line(PAIR, {"quick": quick, "fast": fast,
                         "quick_ttft": Fig(cq["ttft"].median, digits=0, link=f"cell-{cq['id']}"),
                         "quick_dec": Fig(cq["decode"].median, link=f"cell-{cq['id']}"),
                         "fast_ttft": Fig(cf["ttft"].median, digits=0, link=f"cell-{cf['id']}"),
                         "fast_dec": Fig(cf["decode"].median, link=f"cell-{cf['id']}"),
                         "n": Fig(n, "int"), "quick_e2e": Fig(e2e(cq), digits=2), "fast_e2e": Fig(e2e(cf), digits=2)})
    params = {"cls": Term(cls), "quick": quick, "fast": fast, "tokens": Fig(round(n_star), "int")}
    return Finding("crossover", f"crossover:{cls}:{quick}:{fast}", TITLE, TEXT, params, (figure,),
                   Line(CONDITION), Line(CAVEAT))


RULE = FindingRule("crossover", check, order=31)
