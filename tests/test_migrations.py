"""The store's migrations: the order a new database applies them and the schema they end in, pinned.

The expected schema is checked in (tests/fixtures/store_schema.sql). After a
deliberate schema change -- a new migration at the end of daemon/store/migrations.py --
write it again with ``python tests/test_migrations.py > tests/fixtures/store_schema.sql``.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

EXPECTED_SCHEMA = Path(__file__).parent / "fixtures" / "store_schema.sql"

# The names are the file format (every database records them); the order is what new databases apply.
APPLIED_ORDER = [
    "m001_foundation",
    "m002_evidence_gates_memory",
    "m005_gate_checks",
    "m004_memory_attribution",
    "m003_logs_attribution",
    "m006_daemon_service",
    "m008_backends_imports",
    "m007_probes_rules",
    "m011_observed_requests",
    "m010_timestamp_notes",
    "m009_run_liveness",
    "m012_registrations",
    "m014_said_observations",
    "m015_load_steps",
    "m016_publications",
    "m017_run_indexes",
    "m018_said_reasons",
    "m020_fit_checks",
    "m021_load_rates",
    "m022_row_changes",
    "m023_model_shape",
    "m024_variants",
    "m025_row_salts",
    "m026_statement_kinds",
    "m027_run_setup",
    "m028_run_host",
    "m029_host_memory_energy",
    "m030_quality_checks",
    "m031_frozen_campaign",
]


def schema_dump(path: Path) -> str:
    """Every table, index and trigger of a file as SQL, by kind and name (creation order aside)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("select type, name, tbl_name, sql from sqlite_master "
                            "where name not like 'sqlite_%' order by type, name").fetchall()
    finally:
        conn.close()
    return "".join(f"-- {kind} {name} on {table}\n{sql or '(implicit)'};\n\n" for kind, name, table, sql in rows)


def applied(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute(
            "select name from _sqlite_migrations where migration_set = 'cardproof' order by rowid")]
    finally:
        conn.close()


def test_a_new_database_applies_the_migrations_in_the_pinned_order(tmp_path):
    from cardproof.daemon.store import open_store

    open_store(tmp_path / "new.db").close()
    assert applied(tmp_path / "new.db") == APPLIED_ORDER


def test_a_new_database_records_the_version_that_made_it(tmp_path):
    """``user_version`` names the newest cardproof that migrated a file: a newer file is refused by it."""
    from cardproof.daemon.store import open_store
    from cardproof.daemon.store.file import version_number

    open_store(tmp_path / "new.db").close()
    conn = sqlite3.connect(tmp_path / "new.db")
    try:
        assert conn.execute("pragma user_version").fetchone()[0] == version_number() > 0
    finally:
        conn.close()


def test_a_new_database_has_the_pinned_schema(tmp_path):
    from cardproof.daemon.store import open_store

    open_store(tmp_path / "new.db").close()
    assert schema_dump(tmp_path / "new.db") == EXPECTED_SCHEMA.read_text()


def test_the_migrations_are_defined_in_the_order_they_run():
    """daemon/store/migrations.py reads top to bottom as a new file's history."""
    import importlib

    # importlib, not ``from ... import migrations``: the store package's ``migrations`` is the Migrations object
    module = importlib.import_module("cardproof.daemon.store.migrations")
    text = Path(module.__file__).read_text()
    defined = [line.split('"')[1] for line in text.splitlines() if line.startswith("@migrations(name=")]
    assert defined == APPLIED_ORDER
    import sqlite_utils

    # what sqlite-utils would apply to an empty file, asked through its public API
    assert [m.name for m in module.migrations.pending(sqlite_utils.Database(memory=True))] == APPLIED_ORDER


@pytest.mark.parametrize("stop_before", APPLIED_ORDER[1:])
def test_an_older_database_catches_up_to_the_same_schema(tmp_path, stop_before):
    """A file last opened by an older cardproof gets the rest, in order, and ends where a new one starts."""
    import sqlite_utils

    from cardproof.daemon.store.migrations import migrations
    from cardproof.daemon.store import open_store

    old = tmp_path / "old.db"
    db = sqlite_utils.Database(old)
    migrations.apply(db, stop_before=stop_before)
    db.conn.close()
    done = APPLIED_ORDER.index(stop_before)
    assert applied(old) == APPLIED_ORDER[:done]
    store = open_store(old)
    assert store.upgraded == APPLIED_ORDER[done:]
    store.close()
    assert applied(old) == APPLIED_ORDER
    assert schema_dump(old) == EXPECTED_SCHEMA.read_text()


if __name__ == "__main__":  # write the expected schema from a new database
    import tempfile

    from cardproof.daemon.store import open_store

    with tempfile.TemporaryDirectory() as d:
        open_store(Path(d) / "s.db").close()
        sys.stdout.write(schema_dump(Path(d) / "s.db"))


def test_every_table_is_followed_by_the_change_record(tmp_path):
    """A table a later migration adds without ``follow_rows`` would have writes no build sees: every
    table but the record itself carries the three triggers, and each kind of write moves its bucket."""
    from cardproof.daemon.store.migrations import UNFOLLOWED, salted_tables
    from cardproof.daemon.store import open_store

    store = open_store(tmp_path / "new.db")
    try:
        conn = store.db.conn
        tables = {t for t in store.db.table_names() if t not in UNFOLLOWED}
        assert tables and salted_tables(conn) == tables

        def state():
            return conn.execute("select bucket, n, salt from row_changes where tbl = 'campaigns'").fetchall()

        conn.execute("insert into campaigns (id, name) values (1, 'a')")
        conn.execute("insert into campaigns (name) values ('b')")  # appends are the rows above the highest id
        assert state() == []
        seen = [state()]
        for sql in ("update campaigns set name = 'c' where id = 1",
                    "insert or replace into campaigns (id, name) values (1, 'd')",
                    "update campaigns set name = 'd' where id = 1",  # the same value again is still a write
                    "delete from campaigns where id = 2"):
            conn.execute(sql)
            assert state() not in seen, sql
            seen.append(state())
    finally:
        store.close()
