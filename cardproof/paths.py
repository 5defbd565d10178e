"""Where cardproof keeps its data: one function decides, tests redirect it."""

from __future__ import annotations

import os
from pathlib import Path

import click

APP_NAME = "cardproof"


def user_dir() -> Path:
    """The user's data directory: ``CARDPROOF_HOME`` first, else click's app dir."""
    env = os.environ.get("CARDPROOF_HOME")
    if env:
        return Path(env)
    return Path(click.get_app_dir(APP_NAME))


def cache_dir() -> Path:
    """Where cardproof keeps what it can make again (compiled templates): ``CARDPROOF_HOME/cache`` when
    that is set, else ``$XDG_CACHE_HOME/cardproof`` (``~/.cache/cardproof``)."""
    env = os.environ.get("CARDPROOF_HOME")
    if env:
        return Path(env) / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / APP_NAME


def default_db_path() -> Path:
    """The database used when neither ``--db`` nor ``CARDPROOF_DB`` is given."""
    env = os.environ.get("CARDPROOF_DB")
    if env:
        return Path(env)
    return user_dir() / "cardproof.db"


def resolve_db(db: str | os.PathLike | None) -> Path:
    """``--db`` wins, then ``CARDPROOF_DB``, then the user data dir."""
    if db:
        return Path(db)
    return default_db_path()
