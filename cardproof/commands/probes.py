"""``cardproof probes`` and ``cardproof rules``: probe verdicts of a run, and the pass-rule language."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .common import db_option, open_run, run_option


@click.command("probes")
@db_option
@run_option
@click.option("--json", "as_json", is_flag=True, help="Print probe summaries and rule outcomes as JSON.")
def probes_cmd(db: Path | None, run_id: int | None, as_json: bool) -> None:
    """List each model's probe verdicts in a run: verdict, tasks passed, deciding arm, known defects."""
    from cardproof.report.probes import probe_summaries, probes_json

    store, run_id = open_run(db, run_id)
    if as_json:
        click.echo(probes_json(store.db, run_id))
        return
    models = probe_summaries(store.db, run_id)
    click.echo(f"run {run_id}")
    if not models:
        click.echo("no probes in this run")
    for m in models:
        click.echo(f"{m['model']}{' (pinned)' if m['pinned'] else ''}")
        for p in m["probes"]:
            declared = {None: "-", True: "declared", False: "not declared"}[p["declared"]] if p["capability"] else "-"
            flag = "  UNSTABLE: does not grade the model" if p["unstable"] else ""
            click.echo(f"  {p['probe']:<10} {p['verdict']:<27} {p['passed']}/{p['total']}  arm {p['arm']}  "
                       f"[{declared}] {p['attempts']}x, {len(p['defects'])} known defects{flag}")


@click.group("rules")
def rules_group() -> None:
    """Pre-registered pass rules: check an expression, show a run's outcomes."""


@rules_group.command("check")
@click.argument("expression")
@click.option("--campaign", "campaign_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Check the names against this campaign's probes and prompt classes.")
def rules_check(expression: str, campaign_path: Path | None) -> None:
    """Parse and type-check EXPRESSION; print its arms and the names it reads. Exit 2 if it is invalid.

    Checking never evaluates against a run: a pass counts only by a rule
    frozen in a campaign before its run.
    """
    from cardproof.daemon.campaign.model import CampaignError, load_campaign
    from cardproof.daemon.probes import PROBES, VERDICTS
    from cardproof.daemon.server.prompts import PROMPT_CLASSES
    from cardproof.daemon.campaign.rules import RuleError, arms, names, validate_rule

    probes, classes = tuple(PROBES), tuple(PROMPT_CLASSES)
    if campaign_path:
        try:
            camp = load_campaign(campaign_path)
        except CampaignError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        probes = camp.probes.run if camp.probes else ()
        classes = camp.prompt_classes
    try:
        tree = validate_rule(expression, probes=probes, classes=classes, verdicts=VERDICTS)
    except RuleError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo("ok")
    for i, arm in enumerate(arms(tree), 1):
        click.echo(f"arm {i}: {expression[arm.pos:arm.end]}")
    click.echo("reads: " + ", ".join(names(tree)))


@rules_group.command("show")
@db_option
@run_option
def rules_show(db: Path | None, run_id: int | None) -> None:
    """Show a run's frozen rules, their registration and hash checks, and the outcome per model and arm."""
    from cardproof.report.probes import rule_outcomes

    store, run_id = open_run(db, run_id)
    rules = rule_outcomes(store.db, run_id)
    click.echo(f"run {run_id}")
    if not rules:
        click.echo("no rules in this run")
    for r in rules:
        verified = "pre-registered" if r["pre_registered"] else "NOT verifiably pre-registered: " + ", ".join(
            k for k, ok in r["checks"].items() if not ok)
        click.echo(f"{r['name']}: {r['text']}")
        click.echo(f"  registered {r['registered_at']}, run started {r['run_started_at']}, "
                   f"sha256 {r['sha256'][:16]}, {verified}")
        for m in r["models"]:
            arms = "; ".join(f"{a['outcome']}: {a['text']}" for a in m["arms"])
            click.echo(f"  {m['model']:<20} {m['outcome']:<10} {arms}")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (probes_cmd, rules_group,)
