"""``cardproof register``: freeze a campaign's text, SHA-256 and time before it is run."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("register")
@click.argument("campaign", type=click.Path(path_type=Path))
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite database (default: $CARDPROOF_DB, else the user data dir).")
def register_cmd(campaign: Path, db: Path | None) -> None:
    """Pre-register CAMPAIGN: its rules and expectations stand, provably, before any run.

    Exit codes: 0 registered (or already registered: the first time is kept),
    2 invalid campaign, 1 database error.
    """
    from cardproof.daemon.campaign.model import CampaignError, load_campaign
    from cardproof.daemon.campaign.registration import register as freeze
    from cardproof.daemon.store import StoreError, open_store
    from cardproof.paths import resolve_db

    try:
        camp = load_campaign(campaign)
    except CampaignError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    try:
        store = open_store(resolve_db(db))
        try:
            reg, new = freeze(store, camp)
        finally:
            store.close()
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    word = "registered" if new else "already registered"
    click.echo(f"{camp.path}: {word} as {reg['id']} at {reg['registered_at']}, SHA-256 {reg['sha256']}")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (register_cmd,)
