"""Two runs side by side: cells matched by model, prompt class and reasoning.

Deviations are judged against the runs' own spread, not a fixed percentage
(as asv does): a model "moved" only where the shift is larger than the
min–max range either run measured for that cell, *and* the samples support
it by the trend pages' rule (report/history/steps.py: a bootstrap interval
of the ratio of medians that excludes "no change", a change of at least the
campaign's ``min_effect_pct``). With fewer than ``MIN_SAMPLES_FOR_CHANGE``
valid samples on either side no change is called at all: two samples
against two cannot tell a shift from their own noise.

A comparison also names what differs between the two runs (the one rule of
``history.conditions.differences``: what can move a figure, and apart from it
what cannot, such as a server's port), and says per prompt class whether the
earlier run's headline held in the later one.

In short, ``compare.py``: two runs cell by cell, ratio ranges across a campaign's
runs; "beyond spread" only where the samples support it by the history rule, "too few samples" under
3 a side. What differs between the runs (``run_differences``: the runs' conditions, then per model
both measured its file and load facts, all from ``history.conditions.differences``), kept as
``differences`` (can move a figure) and ``aside`` (cannot). Whether run A's headline held in run B
(``headline_held``), per prompt class where A stated a measurable ratio: *held* (the same model
fastest, measurably, and the two runs' ratio ranges over all sample pairs overlap), *margin moved*
(ranges apart), *not held* (another model fastest by median), *not measurable* (the same model
fastest by no measurable difference), *not tested* (no two stable cells of the class in B); the
build adds each row's ratio across the campaign's finished runs up to B (``summaries.ratio_range``),
which the article shows from three runs on. The run article and the compare page say both through
``templates/sections/comparison.md.j2``; ``cardproof compare`` prints them
"""

from __future__ import annotations

import statistics

import sqlite_utils

from . import queries
from .history.conditions import Difference, differences, model_conditions, run_conditions
from .history.series import campaign_settings
from .history.steps import judge

#: valid samples each cell needs before a change between two runs is called
MIN_SAMPLES_FOR_CHANGE = 3


def _positive(cell: dict) -> list[float]:
    return [float(s["decode_tps"]) for s in cell["valid"]
            if isinstance(s.get("decode_tps"), (int, float)) and s["decode_tps"] > 0]


def judge_cells(a: dict, b: dict, min_effect: float) -> dict:
    """What n allows for one cell pair: ``too_few`` samples, or the change's ``interval`` where the samples support one.

    ``interval`` is (low, high) of b/a - 1, or None where the samples do not
    support a change of at least ``min_effect``.
    """
    va, vb = _positive(a), _positive(b)
    if min(len(va), len(vb)) < MIN_SAMPLES_FOR_CHANGE:
        return {"too_few": True, "interval": None}
    verdict = judge([va], [vb], min_effect, f"compare|{a['id']}|{b['id']}")
    return {"too_few": False, "interval": (verdict[1] - 1, verdict[2] - 1) if verdict else None}


def _cells(view: dict) -> dict[tuple, dict]:
    return {(c["model"], c["prompt_class"], bool(c["reasoning"])): c for c in view["cells"]}


def compare_runs(db: sqlite_utils.Database, run_a: int, run_b: int, views: dict | None = None) -> dict:
    """Per-cell deviation of B against A, with the summary the article needs.

    ``views`` (run id -> run_view) saves recomputing views a caller already has.
    """
    views = views if views is not None else {}
    va = views.get(run_a) or queries.run_view(db, run_a)
    vb = views.get(run_b) or queries.run_view(db, run_b)
    ca, cb = _cells(va), _cells(vb)
    min_effect = campaign_settings(vb["run"].get("campaign_json"))["min_effect"]
    rows, only_a, only_b = [], [], []
    for key in sorted(set(ca) | set(cb), key=lambda k: (k[0], k[2], k[1])):
        a, b = ca.get(key), cb.get(key)
        where = {"model": key[0], "prompt_class": key[1], "reasoning": key[2]}
        if a is None or not a["decode"]:
            if b is not None and b["decode"]:
                only_b.append(where)
            continue
        if b is None or not b["decode"]:
            only_a.append(where)
            continue
        da, db_ = a["decode"], b["decode"]
        dev = db_.median / da.median - 1
        spread = max((da.high - da.low) / da.median, (db_.high - db_.low) / db_.median)
        judged = judge_cells(a, b, min_effect)
        rows.append({
            "model": key[0], "prompt_class": key[1], "reasoning": key[2],
            "a": da.median, "b": db_.median, "a_n": da.n, "b_n": db_.n,
            "deviation": dev, "spread": spread,
            # beyond both runs' min–max, and a change the samples support: what n allows
            "beyond_spread": abs(dev) > spread and judged["interval"] is not None,
            "too_few": judged["too_few"], "interval": judged["interval"], "min_effect": min_effect,
            "cell_a": a["id"], "cell_b": b["id"],
        })
    devs = [r["deviation"] for r in rows]
    ra, rb = va["run"], vb["run"]
    diffs = run_differences(db, va, vb)
    held = headline_held(va.get("headline"), vb.get("headline"))
    return {
        "a": ra, "b": rb,
        # asked for explicitly (cardproof compare A B): still compared, but said
        "unfinished": [r for r in (ra, rb) if r["status"] != "completed"],
        "rows": rows,
        "only_a": only_a, "only_b": only_b,
        "median_deviation": statistics.median(devs) if devs else None,
        "low": min(devs) if devs else None,
        "high": max(devs) if devs else None,
        "moved": sorted({r["model"] for r in rows if r["beyond_spread"]}),
        # what differs between the runs: (model or None, Difference); the first can move a figure
        "differences": [x for x in diffs if x[1].moves],
        "aside": [x for x in diffs if not x[1].moves],
        "held": held,
        "held_summary": held_summary(held),
    }


def run_differences(db: sqlite_utils.Database, va: dict, vb: dict) -> list[tuple[str | None, Difference]]:
    """What differs between two run views: the runs' own conditions and campaign settings (model None),
    then per model both runs measured its file and load facts (``history.conditions.differences``)."""
    out: list[tuple[str | None, Difference]] = [(None, d) for d in differences(run_conditions(va["run"]),
                                                                                 run_conditions(vb["run"]))]
    ids = [va["run"]["id"], vb["run"]["id"]]
    facts = model_conditions(db, ids)
    both = sorted({m["name"] for m in va["models"]} & {m["name"] for m in vb["models"]})
    for name in both:
        out += [(name, d) for d in differences(facts.get((ids[0], name), {}), facts.get((ids[1], name), {}))]
    return out


#: whether run A's headline held in run B, per prompt class (``headline_held``)
HELD = "held"
MARGIN_MOVED = "margin moved"
NOT_HELD = "not held"
NOT_MEASURABLE = "not measurable"
NOT_TESTED = "not tested"


def _side(row: dict) -> dict:
    """One run's headline row of a class as the comparison prints it: names, cells, ratio and its range."""
    other = row.get("other")
    return {"best": row["best"]["name"], "best_cell": row["best_cell"]["id"],
            "other": other["name"] if other else None,
            "other_cell": row["other_cell"]["id"] if other else None,
            "ratio": row.get("ratio"), "low": row.get("ratio_low"), "high": row.get("ratio_high"),
            "measurable": bool(other and row.get("measurable"))}


def _verdict(before: dict, after: dict | None) -> str:
    if after is None or after["other"] is None:
        return NOT_TESTED  # no stable cell of the class, or only one: nothing to compare in this run
    if after["best"] != before["best"]:
        return NOT_HELD
    if not after["measurable"]:
        return NOT_MEASURABLE
    if after["other"] != before["other"]:
        return HELD  # the same winner, measured against another reference: no range to set beside the first
    if None in (before["low"], before["high"], after["low"], after["high"]):
        return HELD  # a range with no bound (a zero sample): nothing to set apart
    return MARGIN_MOVED if before["low"] > after["high"] or after["low"] > before["high"] else HELD


def headline_held(before: dict | None, after: dict | None) -> list[dict]:
    """Per prompt class where run A's headline stated a measurable ratio, whether it held in run B.

    ``before``/``after``: the runs' headlines (``findings.headline``). Held: the same model is fastest,
    measurably, and the two runs' ratio ranges (over all sample pairs) overlap; the margin moved: the
    same winner with ranges apart; not held: another model is fastest in B; not measurable: the same
    model is fastest in B, by no measurable difference; not tested: B has no two stable cells of the class.
    """
    if not before:
        return []
    rows_after = {r["cls"]: r for r in (after or {}).get("rows", [])}
    out = []
    for row in before["rows"]:
        if not (row.get("other") and row.get("measurable")):
            continue  # run A stated no ratio for this class: nothing to hold
        a = _side(row)
        b = _side(rows_after[row["cls"]]) if row["cls"] in rows_after else None
        # across: the ratio of the same two models over the campaign's runs, where the build knows them
        out.append({"cls": row["cls"], "before": a, "after": b, "verdict": _verdict(a, b), "across": None})
    return out


def held_summary(held: list[dict]) -> str | None:
    """One word for the whole headline: ``not held`` where any class did not hold, else ``margin moved``
    where a margin moved, ``held`` where every tested class held, ``not tested`` where none was."""
    verdicts = {h["verdict"] for h in held}
    if not verdicts:
        return None
    if verdicts & {NOT_HELD, NOT_MEASURABLE}:
        return NOT_HELD
    if MARGIN_MOVED in verdicts:
        return MARGIN_MOVED
    return HELD if HELD in verdicts else NOT_TESTED


def ratio_range(db: sqlite_utils.Database, campaign_name: str, model_a: str, model_b: str,
                prompt_class: str = "short", views: dict | None = None, *,
                include_unfinished: bool = False) -> dict | None:
    """Decode ratio A/B over every run of the same campaign that measured both: a range, not a point.

    Runs that did not complete (interrupted, failed, still running) count
    only with ``include_unfinished``.
    """
    ratios = []
    views = views if views is not None else {}
    for r in queries.runs(db):
        if r["campaign_name"] != campaign_name:
            continue
        if r["status"] != "completed" and not include_unfinished:
            continue
        v = views.get(r["id"]) or queries.run_view(db, r["id"])
        cells = _cells(v)
        a, b = cells.get((model_a, prompt_class, False)), cells.get((model_b, prompt_class, False))
        if a and b and a["decode"] and b["decode"]:
            ratios.append((r["id"], a["decode"].median / b["decode"].median))
    if not ratios:
        return None
    vals = [x for _, x in ratios]
    return {"runs": [i for i, _ in ratios], "low": min(vals), "high": max(vals), "n": len(vals)}


def previous_run(db: sqlite_utils.Database, run: dict, *, include_unfinished: bool = False) -> int | None:
    """The latest earlier run of the same campaign name, if any.

    Only completed runs compare, on either side, unless ``include_unfinished``:
    an interrupted run's cells hold whatever it reached, and a run stored as
    ``running`` may be one whose process is gone.
    """
    if run["status"] != "completed" and not include_unfinished:
        return None
    row = db.execute(
        f"""select runs.id from runs join campaigns on campaigns.id = runs.campaign_id
           where campaigns.name = ? and runs.started_at < ? and runs.id != ?
           {"" if include_unfinished else "and runs.status = 'completed'"}
           order by runs.started_at desc, runs.id desc limit 1""",
        [run["campaign_name"], run["started_at"], run["id"]],
    ).fetchone()
    return row[0] if row else None
