"""``cardproof gates``: what each gate saw in a run, and whether it is proven."""

from __future__ import annotations

from pathlib import Path

import click

from .common import db_option, open_run, run_option


@click.command("gates")
@db_option
@run_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of gates.")
def gates_cmd(db: Path | None, run_id: int | None, as_json: bool) -> None:
    """List each gate: firings in measurement samples, canary result, threshold."""
    from cardproof.report.gates import gate_summary, summary_json

    store, run_id = open_run(db, run_id)
    if as_json:
        click.echo(summary_json(store.db, run_id))
        return
    click.echo(f"run {run_id}")
    for g in gate_summary(store.db, run_id):
        flag = "  UNPROVEN" if g["unproven"] else ""
        excl = "excludes" if g["exclude"] else "counts only"
        click.echo(
            f"{g['gate']:<17} fired {g['fired_samples']:>4}/{g['judged_samples']:<4} "
            f"canary {g['canary']:<9} threshold "
            + (f"{g['threshold']:g} {g['threshold_unit']}" if g["threshold_unit"] else "—")
            + f" ({excl}){flag}"
        )


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (gates_cmd,)
