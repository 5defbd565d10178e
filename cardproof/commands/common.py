"""What the command modules share: the options every command spells the same, opening a store or a run, failing.

Command modules import from here, never from ``cardproof.cli`` (which
imports them to register their commands), so there is no import cycle.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from cardproof import __version__
from cardproof.paths import resolve_db

DB_HELP = "SQLite database (default: $CARDPROOF_DB, else the user data dir)."


def db_option_with(help_text: str):
    """``--db FILE`` with the command's own help text."""
    return click.option("--db", "db", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help=help_text)


db_option = db_option_with(DB_HELP)
run_option = click.option("--run", "run_id", type=int, default=None, help="Run id (default: the latest run).")
project_option = click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder with mkdocs.yml and site/ (scaffolded when missing).",
)
config_option = click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Daemon config TOML (default: /etc/cardproof/daemon.toml when it exists).",
)


def fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr and exit ``code`` (1 by default; 2 for an invalid file)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def progress(line: str) -> None:
    """Progress of a long command, on stderr (stdout keeps the result)."""
    click.echo(line, err=True)


def open_db(db: Path | None, *, create: bool = True, readonly: bool = False):
    """The store at ``--db`` (else its default), or a one-line error and exit 1.

    ``readonly``: for commands that only read. The file is never created, and
    is opened read-only (see ``open_store(mode="ro")``).
    """
    return open_path(resolve_db(db), create=create, readonly=readonly)


def open_path(path: Path, *, create: bool = True, readonly: bool = False):
    """The store at ``path``; what was done to it or what it is told on stderr; errors exit 1."""
    from cardproof.daemon.store import StoreError, open_store

    try:
        store = open_store(path, create=create, mode="ro" if readonly else "rw")
    except StoreError as exc:
        fail(str(exc))
    if store.upgraded:
        click.echo(f"note: {store.path}: upgraded from an older cardproof ({', '.join(store.upgraded)})", err=True)
    if store.newer_migrations:
        click.echo(f"warning: {store.path}: written by a newer cardproof ({', '.join(store.newer_migrations)}); "
                   f"read as far as cardproof {__version__} knows it", err=True)
    return store


def open_run(db: Path | None, run_id: int | None):
    """An existing store (read-only) and a run in it (default: the latest), or a one-line error."""
    store = open_db(db, readonly=True)
    if run_id is None:
        run_id = store.db.execute("select max(id) from runs").fetchone()[0]
        if run_id is None:
            fail(f"{store.path}: no run in the database")
    elif store.db["runs"].count_where("id = ?", [run_id]) == 0:
        fail(f"{store.path}: no run {run_id}")
    return store, run_id


def daemon_config(config_path: Path | None, *, required: bool = False):
    """The daemon config: the named file, the default file if present, else defaults (invalid: exit 2)."""
    from cardproof.daemon.service.config import DEFAULT_CONFIG_PATH, ConfigError, default_config, load_config
    from cardproof.paths import default_db_path, user_dir

    defaults = {"default_db": default_db_path(), "default_data_dir": user_dir()}
    path = config_path or (DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None)
    if path is None:
        if required:
            fail(f"{DEFAULT_CONFIG_PATH}: no such file; pass --config", 2)
        return default_config(defaults["default_db"], defaults["default_data_dir"])
    try:
        return load_config(path, **defaults)
    except ConfigError as exc:
        fail(str(exc), 2)


def daemon_db(db: Path | None, config_path: Path | None) -> Path:
    """The database the daemon's commands use: --db, the config's, $CARDPROOF_DB, then the default config's."""
    if db:
        return db
    if config_path is None and os.environ.get("CARDPROOF_DB"):
        return resolve_db(None)
    return daemon_config(config_path).db
