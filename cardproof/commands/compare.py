"""``cardproof compare``: two runs, cell by cell, against their own spread."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import db_option, fail, open_run


@click.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_cmd(run_a: int, run_b: int, db: Path | None, as_json: bool) -> None:
    """Compare RUN_B against RUN_A: per-cell deviation, median and range, cells in one run only.

    Either run may be one that did not finish (the article and the index
    never compare those); the output says so first.
    """
    from cardproof.report.compare import compare_runs
    from cardproof.report.history.conditions import plain

    store, _ = open_run(db, run_a)
    if store.db["runs"].count_where("id = ?", [run_b]) == 0:
        fail(f"{store.path}: no run {run_b}")
    cmp = compare_runs(store.db, run_a, run_b)
    unfinished = [{"run": r["id"], "status": r["status"], "why": r.get("liveness") or r.get("error_text")}
                  for r in cmp["unfinished"]]
    differs = [{"model": m, "name": d.key, "kind": d.kind or "condition", "before": d.before, "after": d.after,
                "moves_figures": d.moves} for m, d in cmp["differences"] + cmp["aside"]]
    if as_json:
        click.echo(json.dumps({k: v for k, v in cmp.items() if k not in ("a", "b", "unfinished", "aside")} | {
            "run_a": run_a, "run_b": run_b, "unfinished": unfinished, "differences": differs},
            indent=2, default=str))
        return
    for u in unfinished:
        click.echo(f"note: run {u['run']} did not finish ({u['status']}"
                   + (f": {u['why']}" if u["why"] else "") + "); its cells hold only what it stored")
    click.echo(f"run {run_b} against run {run_a}: {len(cmp['rows'])} comparable cells")
    if cmp["rows"]:
        click.echo(f"median deviation {cmp['median_deviation']:+.1%}, range {cmp['low']:+.1%} to {cmp['high']:+.1%}")
    for r in cmp["rows"]:
        mark = "  beyond spread" if r["beyond_spread"] else ""
        if r.get("too_few"):  # what n allows (report/compare.py)
            mark = f"  n={r['a_n']} against {r['b_n']}: too few samples to call a change"
        elif r.get("interval"):
            mark += f" ({r['interval'][0]:+.1%} to {r['interval'][1]:+.1%})"
        click.echo(f"  {r['model']:<24} {r['prompt_class']:<7} {'R' if r['reasoning'] else ' '} "
                   f"{r['a']:>10.1f} -> {r['b']:>10.1f}  {r['deviation']:+7.1%} (spread ±{r['spread']:.1%}){mark}")
    for m, d in cmp["differences"]:
        click.echo(f"  differs: {m + ': ' if m else ''}{plain(d)}")
    for m, d in cmp["aside"]:
        click.echo(f"  differs, cannot move a figure: {m + ': ' if m else ''}{plain(d)}")
    _held_lines(cmp["held"], run_a)
    for w in cmp["only_a"]:
        click.echo(f"  only in run {run_a}: {w['model']} {w['prompt_class']} reasoning={w['reasoning']}")
    for w in cmp["only_b"]:
        click.echo(f"  only in run {run_b}: {w['model']} {w['prompt_class']} reasoning={w['reasoning']}")


def _ratio(side: dict | None) -> str:
    """``M xR (xL-H) against O``, or "-" where the run has no ratio for the class."""
    if not side or side["other"] is None or not side["ratio"]:
        return "-"
    span = f" (x{side['low']:.2f}-{side['high']:.2f})" if side["low"] and side["high"] else ""
    return f"{side['best']} x{side['ratio']:.2f}{span} against {side['other']}"


def _held_lines(held: list[dict], run_a: int) -> None:
    """Whether run A's headline held in run B, one line per prompt class (report/compare.py headline_held)."""
    for h in held:
        a, b = h["before"], h["after"]
        said = {"held": "held",
                "margin moved": "held, the margin moved (the ratio ranges are apart)",
                "not held": f"did not hold: {a['best']} was fastest in run {run_a}, {b and b['best']} in this run",
                "not measurable": f"did not hold: no measurable difference between {a['best']} and "
                                  f"{b and b['other']} in this run",
                "not tested": "not tested: this run has no two stable cells of the class"}[h["verdict"]]
        click.echo(f"  headline of run {run_a}, {h['cls']}: {said} [run {run_a}: {_ratio(a)}; now: {_ratio(b)}]")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (compare_cmd,)
