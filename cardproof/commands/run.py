"""``cardproof run`` and ``cardproof runs``: measure a campaign, list what was measured."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cardproof.paths import resolve_db

from .common import daemon_db, db_option, fail, open_db, progress


@click.command()
@click.argument("campaign", type=click.Path(path_type=Path))
@db_option
@click.option("--via-daemon", is_flag=True,
              help="Queue the campaign for the running daemon instead of running it here.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Daemon config (with --via-daemon; its database is used unless --db is given).")
def run(campaign: Path, db: Path | None, via_daemon: bool, config_path: Path | None) -> None:
    """Run CAMPAIGN (a TOML file) against its server and store every sample.

    Exit codes: 0 all samples measured, 3 completed with exceptions,
    1 failed (server unreachable), 2 invalid campaign, 130 interrupted.
    With --via-daemon: 0 once queued.
    """
    from cardproof.daemon.campaign.model import CampaignError, load_campaign
    from cardproof.daemon.run.runner import run_campaign
    from cardproof.daemon.store import StoreError, open_store

    try:
        camp = load_campaign(campaign)
    except CampaignError as exc:
        fail(str(exc), 2)
    if via_daemon:
        from cardproof.daemon.service.queue import enqueue

        path = daemon_db(db, config_path)
        try:
            store = open_store(path)
            queue_id = enqueue(store, camp)
        except StoreError as exc:
            fail(str(exc))
        click.echo(f"queued as {queue_id} in {path}; see: cardproof status")
        return
    from cardproof.daemon.campaign.registration import check_before_run, link_run

    store = open_db(db)
    try:
        progress(check_before_run(store.db, camp))  # the hash decides: registered before, or at run start
        outcome = run_campaign(store, camp, echo=progress)
        link_run(store, outcome.run_id, camp)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    click.echo(f"run {outcome.run_id}: {outcome.status}, {outcome.measured}/{outcome.planned} samples, "
               f"db {resolve_db(db)}")
    sys.exit(outcome.exit_code)


@click.command("runs")
@db_option
def runs_cmd(db: Path | None) -> None:
    """List runs with status and coverage.

    A run stored as running whose process is gone shows as interrupted, with
    the coverage of what it stored; the database is not changed (the next
    ``cardproof run`` or daemon start writes that).
    """
    from cardproof.report.queries import runs as q_runs

    store = open_db(db, readonly=True)
    for r in q_runs(store.db):
        cov = f"{(r['coverage'] or 0):.0%}"
        click.echo(
            f"{r['id']:>4}  {(r['started_at'] or '')[:19]:<19}  {r['status']:<11} {cov:>5} "
            f"({r['samples_measured']}/{r['samples_planned']})  {r['campaign_name']}"
        )
        if r.get("liveness"):
            click.echo(f"      {r['liveness']}")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (run, runs_cmd,)
