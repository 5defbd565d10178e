"""``cardproof gates``: what each gate saw in a run, and whether it is proven."""

from __future__ import annotations

from pathlib import Path

import click


def register(cli: click.Group) -> None:
    @cli.command("gates")
    @click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help="SQLite database (default: $CARDPROOF_DB, else the user data dir).")
    @click.option("--run", "run_id", type=int, default=None, help="Run id (default: the latest run).")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON list of gates.")
    def gates_cmd(db: Path | None, run_id: int | None, as_json: bool) -> None:
        """List each gate: firings in measurement samples, canary result, threshold."""
        from cardproof.cli import open_run
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
