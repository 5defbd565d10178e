"""``cardproof history``: each model's series across runs and the steps the samples support."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import db_option, open_db

_UNITS = {"decode_tps": "tok/s", "prefill_tps": "tok/s", "ttft_ms": "ms", "load_seconds": "s", "aggregate_tps": "tok/s",
          "ttft_p90_ms": "ms"}


def cell_text(series: dict) -> str:
    """'short, reasoning off', 'load 4 streams, short', 'depth 4096 tokens, short'."""
    kind = series.get("kind", "measure")
    if kind == "load":
        return f"load {series['streams']} streams, {series['prompt_class']}"
    if kind == "depth":
        return f"depth {series['depth_tokens']} tokens, {series['prompt_class']}"
    if kind == "rate":
        return f"{series['rate_rps']:g} requests/s, {series['prompt_class']}"
    return f"{series['prompt_class']}, reasoning {'on' if series['reasoning'] else 'off'}"


def step_sentence(series: dict, step: dict) -> str:
    """One step in plain English, e.g. 'decode of X fell 12.0 % (9.1–15.2 %) between run 41 (build b7342) and ...'."""
    from cardproof.report.history.conditions import plain
    from cardproof.report.history.render import METRIC_NAMES  # the trend pages' names (their English msgids)

    def build(p):
        return f" (build {p['server_build']})" if p.get("server_build") else ""

    verb = "rose" if step["change"] > 0 else "fell"
    lo, hi = sorted((abs(step["low"]), abs(step["high"])))
    text = (f"{METRIC_NAMES[step['metric']]} of {series['model']} ({cell_text(series)}) {verb} "
            f"{abs(step['change']) * 100:.1f} % "
            f"({lo * 100:.1f}–{hi * 100:.1f} %) "
            f"between run {step['before']['run_id']}{build(step['before'])} and run "
            f"{step['after']['run_id']}{build(step['after'])}, and stayed there for {step['stayed']} run(s)")
    if step["changes"]:
        text += "; changed: " + "; ".join(plain(d) for d in step["changes"])
    else:
        text += "; no stored condition changed"
    return text


def _point_json(p: dict) -> dict:
    return {"run": p["run_id"], "started_at": p["started_at"], "state": p["state"], "cell": p["cell_id"],
            "conditions": p["conditions"], "changed": [list(c) for c in p["changes"]],
            "changed_not_moving_figures": [list(c) for c in p.get("aside", [])],
            **{m: ({"median": s.median, "low": s.low, "high": s.high, "n": s.n} if s else None)
               for m, s in p["spread"].items()}}


def _step_json(step: dict) -> dict:
    return {"metric": step["metric"], "run_before": step["before"]["run_id"], "run_after": step["after"]["run_id"],
            "change": step["change"], "low": step["low"], "high": step["high"], "stayed_runs": step["stayed"],
            "regression": step["regression"], "changed": [list(c) for c in step["changes"]],
            "skipped_runs": step["skipped"]}


@click.command("history")
@db_option
@click.option("--campaign", default=None, help="Only this campaign (by name).")
@click.option("--model", default=None, help="Only this model (by name).")
@click.option("--json", "as_json", is_flag=True, help="Print series, points and steps as JSON.")
def history_cmd(db: Path | None, campaign: str | None, model: str | None, as_json: bool) -> None:
    """Each model's figures across runs (per campaign and cell) and the steps the samples support.

    A step is claimed only where the bootstrap interval of the change
    excludes "no change" and the change is at least the campaign's
    ``[report] min_effect_pct`` (default 5); interrupted runs and
    unstable cells are listed but never start or end one.
    """
    from cardproof.report.history import build_series
    from cardproof.report.history.render import assign_pages
    from cardproof.report.tolerance import shielded

    store = open_db(db, readonly=True)
    try:
        with shielded(store):  # damaged rows: named on stderr, read as NULL
            series = build_series(store.db, campaign=campaign, model=model)
            assign_pages(series)  # the page names the site uses (two names that slug alike differ)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps([{
            "campaign": s["campaign"], "model": s["model"], "prompt_class": s["prompt_class"],
            "reasoning": s["reasoning"], "kind": s.get("kind", "measure"), "streams": s.get("streams"),
            "depth_tokens": s.get("depth_tokens"), "rate_rps": s.get("rate_rps"), "min_effect": s["min_effect"], "page": s["page"],
            "points": [_point_json(p) for p in s["points"]], "steps": [_step_json(st) for st in s["steps"]],
        } for s in series], indent=2, default=str))
        return
    if not series:
        click.echo("no series" + (f" for campaign {campaign!r}" if campaign else "")
                   + (f" and model {model!r}" if model else ""))
        return
    for s in series:
        shown = [p for p in s["points"] if p["state"] != "ok"]
        click.echo(f"{s['campaign']} · {s['model']} · {cell_text(s).replace(', ', ' · ')}: {len(s['points'])} runs "
                   f"({len(shown)} not usable for steps), {len(s['steps'])} step(s)")
        for st in s["steps"]:
            click.echo("  " + step_sentence(s, st))


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (history_cmd,)
