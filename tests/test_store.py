"""The store: migrations, WAL, path resolution, and clear errors on bad files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import StoreError, migrations, open_store
from cardproof.paths import resolve_db


def test_migrations_create_tables_in_wal(tmp_path):
    store = open_store(tmp_path / "a.db")
    names = set(store.db.table_names())
    assert {"campaigns", "runs", "models", "loads", "cells", "samples"} <= names
    assert store.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    applied = [m.name for m in migrations.applied(store.db)]
    assert applied == [m.name for m in migrations._migrations]
    store.close()
    # reopening applies nothing twice
    store = open_store(tmp_path / "a.db")
    assert [m.name for m in migrations.applied(store.db)] == applied
    store.close()


def test_db_path_resolution(tmp_path, monkeypatch):
    assert resolve_db(tmp_path / "x.db") == tmp_path / "x.db"
    monkeypatch.setenv("CARDPROOF_DB", str(tmp_path / "env.db"))
    assert resolve_db(None) == tmp_path / "env.db"
    monkeypatch.delenv("CARDPROOF_DB")
    monkeypatch.setenv("CARDPROOF_HOME", str(tmp_path / "home"))
    assert resolve_db(None) == tmp_path / "home" / "cardproof.db"


def test_corrupt_db_is_a_clear_error_and_file_is_kept(tmp_path):
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError) as err:
        open_store(bad)
    assert str(bad) in str(err.value)
    assert bad.read_bytes() == b"this is not sqlite" * 100
    result = CliRunner().invoke(cli, ["runs", "--db", str(bad)])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {bad}: cannot open database")


def test_locked_db_is_a_clear_error(tmp_path):
    path = tmp_path / "locked.db"
    open_store(path).close()
    holder = sqlite3.connect(path)
    holder.execute("begin exclusive")
    try:
        store = open_store(path)  # migrations are applied: nothing pending, opening works
        with pytest.raises(StoreError) as err:
            import time
            t = time.monotonic()
            store.db.conn.execute("pragma busy_timeout = 200")
            store.insert("campaigns", {"name": "x", "sha256": "y", "toml_text": "", "registered_at": "z"})
        assert str(path) in str(err.value) and "locked" in str(err.value)
    finally:
        holder.rollback()
        holder.close()
    rows = sqlite3.connect(path).execute("select count(*) from campaigns").fetchone()[0]
    assert rows == 0


def test_runs_on_missing_db(tmp_path):
    result = CliRunner().invoke(cli, ["runs", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 1
    assert "no such database" in result.output


def test_every_package_folder_is_installed():
    """A package folder missing from pyproject works in an editable install and breaks a real one."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    mapping = {"cardproof": "cardproof", "daemon": "cardproof.daemon", "report": "cardproof.report"}
    found = set()
    for top, name in mapping.items():
        for init in (root / top).rglob("__init__.py"):
            rel = init.parent.relative_to(root / top).parts
            found.add(".".join((name, *rel)))
    assert found <= listed, sorted(found - listed)
