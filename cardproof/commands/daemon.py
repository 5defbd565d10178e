"""``cardproof daemon``, ``cardproof queue`` and ``cardproof status``.

The daemon runs campaigns from a queue in the database; ``queue add`` is how
a campaign reaches it from any other process. Which database: ``--db``, else
the ``--config`` file's, else ``$CARDPROOF_DB``, else the default config file
(/etc/cardproof/daemon.toml) when it exists, else the user data dir.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .common import config_option, daemon_config, daemon_db, db_option_with, fail, open_path

db_option = db_option_with("SQLite database (default: see `cardproof queue --help`).")


@click.group("daemon")
def daemon_group() -> None:
    """The capture service: collectors, the campaign queue, systemd."""


@daemon_group.command("run")
@config_option
def daemon_run(config_path: Path | None) -> None:
    """Run the daemon in the foreground until SIGTERM or Ctrl-C (systemd starts it this way).

    Exit codes: 0 stopped cleanly, 1 could not start or a request outlived
    stop_timeout_s, 2 invalid config.
    """
    from cardproof.daemon.service.main import Daemon, DaemonError
    from cardproof.daemon.store import StoreError

    cfg = daemon_config(config_path)
    if cfg.path is None:
        click.echo(f"cardproof daemon: no config file, using defaults (db {cfg.db})", err=True)
    try:
        code = Daemon(cfg).run()
    except (DaemonError, StoreError) as exc:
        fail(str(exc))
    sys.exit(code)


@daemon_group.command("install-unit")
@config_option
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("/etc/systemd/system/cardproof.service"), show_default=True,
              help="Where the unit file is written.")
@click.option("--user", default=None, help="Run the service as this user (User=).")
@click.option("--no-verify", is_flag=True, help="Skip `systemd-analyze verify`.")
def install_unit(config_path: Path | None, output: Path, user: str | None, no_verify: bool) -> None:
    """Write the systemd unit (Type=notify, watchdog, hardening) and verify it."""
    from cardproof.daemon.service.config import DEFAULT_CONFIG_PATH, EXAMPLE_CONFIG, parse_config
    from cardproof.daemon.service.unit import render_unit, verify_unit

    path = config_path or DEFAULT_CONFIG_PATH
    if path.exists():
        cfg = daemon_config(path)
    else:  # written before the config: the example's paths are the ones it will have
        cfg = parse_config(EXAMPLE_CONFIG, str(path), default_db=Path("/var/lib/cardproof/cardproof.db"),
                           default_data_dir=Path("/var/lib/cardproof"))
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render_unit(cfg, path.absolute(), user=user))
    except OSError as exc:
        fail(f"{output}: cannot write unit file: {exc.strerror}")
    click.echo(f"unit written: {output}")
    if not path.exists():
        click.echo(f"note: {path} does not exist yet; `cardproof daemon example-config` prints one", err=True)
    if not no_verify:
        ok, text = verify_unit(output)
        if ok is None:
            click.echo(f"not verified: {text}", err=True)
        elif not ok:
            fail(f"{output}: systemd-analyze verify failed: {text}")
        else:
            click.echo("systemd-analyze verify: ok")
    click.echo(f"then: systemctl daemon-reload && systemctl enable --now {output.name}")


@daemon_group.command("example-config")
def exampledaemon_config() -> None:
    """Print a commented daemon config to start from."""
    from cardproof.daemon.service.config import EXAMPLE_CONFIG

    click.echo(EXAMPLE_CONFIG, nl=False)


@click.group("queue")
def queue_group() -> None:
    """The daemon's campaign queue (in the database; the daemon polls it).

    Database: --db, else the --config file's, else $CARDPROOF_DB, else
    /etc/cardproof/daemon.toml's when it exists, else the user data dir.
    """


@queue_group.command("add")
@click.argument("campaign", type=click.Path(path_type=Path))
@config_option
@db_option
@click.option("--quiet/--no-quiet", "quiet", default=None,
              help="Wait for quiet cards first (default: the daemon config's [quiet] enabled).")
def queue_add(campaign: Path, config_path: Path | None, db: Path | None, quiet: bool | None) -> None:
    """Validate CAMPAIGN and queue it; the running daemon picks it up."""
    from cardproof.daemon.campaign.model import CampaignError, load_campaign
    from cardproof.daemon.service.queue import enqueue

    try:
        camp = load_campaign(campaign)
    except CampaignError as exc:
        fail(str(exc), 2)
    path = daemon_db(db, config_path)
    store = open_path(path)
    try:
        qid = enqueue(store, camp, require_quiet=quiet)
        ahead = store.db.execute(
            "select count(*) from daemon_queue where status in ('queued', 'running') and id < ?", [qid]
        ).fetchone()[0]
    finally:
        store.close()
    click.echo(f"queued {qid}: {camp.name} ({camp.sha256[:12]}), {ahead} ahead of it, db {path}")


@queue_group.command("list")
@config_option
@db_option
def queue_list(config_path: Path | None, db: Path | None) -> None:
    """List queue entries with status, attempts, last run and reason."""
    store = open_path(daemon_db(db, config_path), readonly=True)
    try:
        for q in store.db.query("select * from daemon_queue order by id"):
            run = f" run {q['last_run_id']}" if q["last_run_id"] else ""
            click.echo(f"{q['id']:>4} {q['status']:<9} {q['campaign_name']} (attempts {q['attempts']}){run}"
                       + (f": {q['reason']}" if q["reason"] else ""))
    finally:
        store.close()


@queue_group.command("cancel")
@click.argument("queue_id", type=int)
@config_option
@db_option
def queue_cancel(queue_id: int, config_path: Path | None, db: Path | None) -> None:
    """Cancel a queued entry (a running one stops with the daemon: systemctl stop)."""
    from cardproof.daemon.service.queue import cancel

    store = open_path(daemon_db(db, config_path), create=False)
    try:
        if not cancel(store, queue_id):
            fail(f"{store.path}: queue entry {queue_id} is not queued")
    finally:
        store.close()
    click.echo(f"cancelled {queue_id}")


@click.command("status")
@config_option
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status_cmd(config_path: Path | None, db: Path | None, as_json: bool) -> None:
    """The daemon's state (from its heartbeat), the current run's progress and the queue.

    Exit codes: 0 when the daemon runs, or when no daemon has run on this
    database yet ("no daemon has run": nothing is wrong, there is nothing
    to report); 3 when it ran and is now stopped or dead.
    """
    from cardproof.daemon.service.statusview import daemon_status, format_status, never_run

    path = daemon_db(db, config_path)
    if not path.exists():  # not created for a status look: no daemon has written here
        s = never_run(str(path), "no database there yet")
        click.echo(json.dumps(s, indent=2) if as_json else format_status(s)[0])
        sys.exit(0)
    store = open_path(path, readonly=True)
    try:
        s = daemon_status(store)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(s, indent=2, default=str))
    else:
        for line in format_status(s):
            click.echo(line)
    sys.exit(0 if s["daemon"]["verdict"] in ("running", "never started") else 3)


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (daemon_group, queue_group, status_cmd,)
