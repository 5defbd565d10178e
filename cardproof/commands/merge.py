"""``cardproof merge``: runs from another host's database, without duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import db_option_with, fail, open_db


@click.command("merge")
@click.argument("other", type=click.Path(path_type=Path))
@db_option_with("SQLite database to merge into (default: $CARDPROOF_DB, else the user data dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the merge report as JSON.")
def merge_cmd(other: Path, db: Path | None, as_json: bool) -> None:
    """Bring the runs of OTHER (another machine's database) into this one.

    A run is identified by host, start time and campaign SHA-256; merging
    again changes nothing. A run present in both with different contents
    is reported as a conflict and left as it is here. OTHER is only read.
    Exit code 3 when conflicts were found.
    """
    from cardproof.daemon.store.merge import MergeError, merge_database
    from cardproof.daemon.store import StoreError

    store = open_db(db)
    try:
        report = merge_database(store, other)
    except (MergeError, StoreError) as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"{other}: {len(report['merged'])} runs merged, {len(report['present'])} already here, "
                   f"{len(report['conflicts'])} conflicts, {len(report['skipped'])} skipped, "
                   f"{report['llama_bench']} llama-bench imports")
        for c in report["conflicts"]:
            fields = ", ".join(f"{k}: here {a!r}, there {b!r}" for k, (a, b) in c["differs"].items())
            click.echo(f"  conflict: run {c['run_id']} ({c['host']} {c['started_at']}): {fields}; kept ours")
        for s in report["skipped"]:
            click.echo(f"  skipped: {s['host']} {s['started_at']}: {s['reason']}")
        for w in report["warnings"]:
            click.echo(f"  warning: {w}")
    if report["conflicts"]:
        raise SystemExit(3)


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (merge_cmd,)
