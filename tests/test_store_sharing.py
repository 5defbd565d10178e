"""One database, several processes, and files that are not ours.

Real processes open a brand-new file at once; real SQLite files of another
application, of an older and of a newer cardproof are opened by the real
commands, and a file that is refused is checked byte for byte afterwards.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import StoreError, migrations, open_store
from cardproof.daemon.store.file import version_number

# each child opens the store at the same moment, then writes one row of its own
CHILD = """
import sys, time
from cardproof.daemon.store import open_store
path, start, tag = sys.argv[1], float(sys.argv[2]), sys.argv[3]
time.sleep(max(0.0, start - time.time()))
store = open_store(path)
store.insert("campaigns", {"name": tag, "sha256": tag, "toml_text": "", "path": "", "registered_at": "now"})
store.close()
"""


def run_together(path: Path, n: int) -> list[subprocess.CompletedProcess]:
    start = time.time() + 2.0  # after every interpreter has started and imported
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(start), f"p{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_six_processes_create_one_new_database_at_once(tmp_path):
    for round_ in range(3):  # a race that is lost now and then must not pass by luck
        path = tmp_path / f"new-{round_}.db"
        results = run_together(path, 6)
        assert [r.returncode for r in results] == [0] * 6, [r.stderr.strip().splitlines()[-1:] for r in results]
        conn = sqlite3.connect(path)
        names = sorted(r[0] for r in conn.execute("select name from campaigns"))
        assert names == [f"p{i}" for i in range(6)]
        applied = [r[0] for r in conn.execute("select name from _sqlite_migrations where migration_set = 'cardproof'")]
        assert sorted(applied) == sorted(m.name for m in migrations._migrations)  # each once
        assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
        conn.close()


def test_a_writer_waits_for_another_process_holding_the_lock(tmp_path):
    path = tmp_path / "busy.db"
    open_store(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('begin immediate'); c.execute(\"insert into models (name) values ('held')\")\n"
         "print('locked', flush=True); time.sleep(6); c.execute('commit')\n", str(path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        store = open_store(path)  # nothing pending: opening needs no lock
        store.insert("models", {"name": "mine"})
        waited_s = time.monotonic() - t0
        store.close()
    finally:
        holder.wait(timeout=30)
    assert waited_s >= 5.0  # it waited for the holder, longer than the old 5 s timeout, instead of failing
    rows = sorted(r[0] for r in sqlite3.connect(path).execute("select name from models"))
    assert rows == ["held", "mine"]


def foreign_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript("create table notes (id integer primary key, body text);"
                       "insert into notes (body) values ('keep me');"
                       "create index notes_body on notes (body);")
    conn.commit()
    conn.close()
    return path


def foreign_wal_db(path: Path) -> Path:
    """Another application's file in WAL mode, closed cleanly: no -wal or -shm beside it."""
    conn = sqlite3.connect(path)
    conn.execute("pragma journal_mode=wal")
    conn.executescript("create table notes (id integer primary key, body text);"
                       "insert into notes (body) values ('keep me');")
    conn.commit()
    conn.close()
    assert not Path(f"{path}-wal").exists()
    return path


def sqlite_utils_app_db(path: Path) -> Path:
    """Another application that also records its migrations with sqlite-utils."""
    conn = sqlite3.connect(path)
    conn.executescript("create table _sqlite_migrations (id integer primary key, migration_set text, name text, "
                       "applied_at text);"
                       "insert into _sqlite_migrations (migration_set, name, applied_at) values "
                       "('otherapp', 'm001_init', 'x');"
                       "create table things (id integer primary key);")
    conn.commit()
    conn.close()
    return path


def odd_migrations_table_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript("create table _sqlite_migrations (version integer);"
                       "insert into _sqlite_migrations values (7);")
    conn.commit()
    conn.close()
    return path


COMMANDS = [
    ["runs"], ["gates"], ["probes"], ["rules", "show"], ["compare", "1", "2"], ["loads"], ["status"],
    ["queue", "list"], ["queue", "cancel", "1"], ["merge", "OTHER"], ["logs", "import", "LOG"],
    ["report", "build", "--no-mkdocs", "--project", "PROJECT"],
    ["run", "CAMPAIGN"],
]


def _args(cmd: list[str], db: Path, tmp_path: Path) -> list[str]:
    log = tmp_path / "server.log"
    log.write_text("srv  main: server is listening on http://127.0.0.1:1\n")
    camp = tmp_path / "camp.toml"
    camp.write_text('[campaign]\nname = "t"\nprompt_classes = ["short"]\nrepetitions = 1\n'
                    '[server]\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "m"\n')
    other = tmp_path / "other-cardproof.db"
    if not other.exists():
        open_store(other).close()
    subst = {"LOG": str(log), "CAMPAIGN": str(camp), "OTHER": str(other),
             "PROJECT": str(tmp_path / "project")}
    return [subst.get(a, a) for a in cmd] + ["--db", str(db)]


@pytest.mark.parametrize("make", [foreign_db, foreign_wal_db, sqlite_utils_app_db, odd_migrations_table_db])
def test_every_command_refuses_a_database_that_is_not_ours_and_leaves_it_as_it_was(tmp_path, make):
    db = make(tmp_path / "some-other-app.sqlite")
    before = digest(db)
    files = sorted(p.name for p in tmp_path.iterdir())
    for cmd in COMMANDS:
        result = CliRunner().invoke(cli, _args(cmd, db, tmp_path))
        assert result.exit_code == 1, (cmd, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, (cmd, result.output)
        assert lines[0] == (f"error: {db}: not a cardproof database: it holds {_objects(db)} "
                            f"tables or indexes but no record of cardproof migrations (_sqlite_migrations); "
                            "left untouched"), cmd
        assert digest(db) == before, cmd
    # no journal, WAL or shared-memory file appeared beside it either
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(db.name)) == [db.name]
    assert {p.name for p in tmp_path.iterdir()} - set(files) <= {"server.log", "camp.toml",
                                                                  "other-cardproof.db", "other-cardproof.db-wal",
                                                                  "other-cardproof.db-shm", "project"}
    with pytest.raises(StoreError):
        open_store(db)
    assert digest(db) == before


def _objects(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute("select count(*) from sqlite_master where name not like 'sqlite\\_%' escape '\\'"
                            ).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("cmd", [["runs"], ["gates"], ["probes"], ["rules", "show"], ["compare", "1", "2"],
                                 ["loads"], ["queue", "list"], ["report", "build", "--no-mkdocs", "--project", "P"]])
def test_reading_commands_never_create_a_database(tmp_path, cmd):
    db = tmp_path / "sub" / "none.db"
    args = [str(tmp_path / "project") if a == "P" else a for a in cmd]
    result = CliRunner().invoke(cli, args + ["--db", str(db)])
    assert result.exit_code == 1, result.output
    assert f"error: {db}: no such database" in result.output
    assert not db.exists() and not db.parent.exists()


def test_status_without_a_database_creates_none(tmp_path):
    db = tmp_path / "none.db"
    CliRunner().invoke(cli, ["status", "--db", str(db)])
    assert not db.exists()


def test_reading_an_empty_file_is_refused_and_writing_initialises_it(tmp_path):
    db = tmp_path / "empty.db"
    db.write_bytes(b"")
    result = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert result.exit_code == 1
    assert "empty database" in result.output and db.read_bytes() == b""
    open_store(db).close()  # a write command may make an empty file a store
    assert CliRunner().invoke(cli, ["runs", "--db", str(db)]).exit_code == 0


def make_newer(db: Path, *, user_version: int | None = None) -> None:
    open_store(db).close()
    conn = sqlite3.connect(db)
    conn.execute("insert into _sqlite_migrations (migration_set, name, applied_at) values "
                 "('cardproof', 'm099_from_the_future', '2099-01-01')")
    conn.execute("create table future_things (id integer primary key)")
    if user_version is not None:
        conn.execute(f"pragma user_version = {user_version}")
    conn.commit()
    conn.close()


def test_a_newer_database_is_refused_for_writing_and_names_the_version_needed(tmp_path):
    db = tmp_path / "newer.db"
    make_newer(db, user_version=version_number("2.3.4"))
    before = digest(db)
    with pytest.raises(StoreError) as err:
        open_store(db)
    msg = str(err.value)
    assert "m099_from_the_future" in msg and "2.3.4 or later" in msg and str(db) in msg
    for cmd in (["logs", "import", "LOG"], ["run", "CAMPAIGN"], ["queue", "cancel", "1"], ["merge", "OTHER"]):
        result = CliRunner().invoke(cli, _args(cmd, db, tmp_path))
        assert result.exit_code == 1, (cmd, result.output)
        assert result.output.strip().splitlines() == [f"error: {msg}"], cmd
    assert digest(db) == before


def test_a_newer_database_without_a_recorded_version_says_a_newer_cardproof(tmp_path):
    db = tmp_path / "newer.db"
    make_newer(db)
    with pytest.raises(StoreError, match="needs a newer cardproof"):
        open_store(db)


def test_a_newer_database_can_still_be_read_with_a_warning(tmp_path):
    """Migrations only add tables and columns: what this version knows reads the same."""
    db = tmp_path / "newer.db"
    make_newer(db)
    before = digest(db)
    result = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "written by a newer cardproof (m099_from_the_future)" in result.stderr
    assert digest(db) == before


def test_an_older_database_is_upgraded_when_read_and_the_report_reads_it(tmp_path):
    db = tmp_path / "older.db"
    import sqlite_utils

    last = migrations._migrations[-1].name
    old = sqlite_utils.Database(db)
    migrations.apply(old, stop_before=last)
    old.close()
    result = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert f"upgraded from an older cardproof ({last})" in result.stderr
    store = open_store(db, mode="ro")
    assert [m.name for m in migrations.applied(store.db)][-1] == last
    assert store.upgraded == [] and store.readonly
    store.close()


def test_a_read_only_store_refuses_every_write(tmp_path):
    db = tmp_path / "a.db"
    open_store(db).close()
    store = open_store(db, mode="ro")
    with pytest.raises(StoreError, match="readonly"):
        store.insert("models", {"name": "x"})
    store.close()
    assert sqlite3.connect(db).execute("select count(*) from models").fetchone()[0] == 0


@pytest.mark.parametrize("name", ["what?.db", "hash#1.db", "100%.db", "two words.db", "a?mode=rwc.db"])
def test_file_names_with_uri_characters(tmp_path, name):
    db = tmp_path / name
    store = open_store(db)
    store.insert("models", {"name": "x"})
    store.close()
    result = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert result.exit_code == 0, result.output
    ro = open_store(db, mode="ro")
    assert ro.db.execute("select name from models").fetchall() == [("x",)]
    ro.close()
    # nothing was created under a name cut at a URI character
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(name) and p.name != "home") == []


def test_a_directory_is_not_a_database(tmp_path):
    for mode in ("rw", "ro"):
        with pytest.raises(StoreError, match="is a directory"):
            open_store(tmp_path, mode=mode)


def test_two_processes_register_the_same_model_once(tmp_path):
    db = tmp_path / "m.db"
    open_store(db).close()
    code = ("import sys, time\nfrom cardproof.daemon.store import open_store\n"
            "s = open_store(sys.argv[1]); time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
            "ids = {s.upsert_model({'name': f'model-{i}', 'digest': 'd'}) for i in range(40)}\nprint(len(ids))\n")
    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", code, str(db), str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in outs]
    conn = sqlite3.connect(db)
    assert conn.execute("select count(*), count(distinct name) from models").fetchone() == (40, 40)


def test_a_write_lock_inside_a_callers_transaction_is_part_of_it(tmp_path):
    """The caller decides: its rollback takes back what was written under the lock, its own rows too."""
    store = open_store(tmp_path / "n.db")
    conn = store.db.conn
    conn.execute("insert into campaigns (name) values ('outer')")  # the caller's transaction begins here
    store.upsert_model({"name": "inner"})
    assert conn.in_transaction
    conn.rollback()
    assert conn.execute("select (select count(*) from campaigns), (select count(*) from models)").fetchone() == (0, 0)
    store.close()


def test_a_real_process_leaves_nothing_beside_a_wal_file_that_is_not_ours(tmp_path):
    """A process that exits without closing its connection leaves SQLite's -wal and -shm files behind."""
    db = foreign_wal_db(tmp_path / "other.sqlite")
    before = digest(db)
    log = tmp_path / "server.log"
    log.write_text("srv  main: server is listening on http://127.0.0.1:1\n")
    for cmd in (["runs"], ["gates"], ["logs", "import", str(log)], ["report", "build", "--no-mkdocs", "--project",
                                                                    str(tmp_path / "project")]):
        r = subprocess.run([sys.executable, "-m", "cardproof.cli", *cmd, "--db", str(db)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and "not a cardproof database" in r.stderr, (cmd, r.stderr)
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(db.name)) == [db.name], cmd
    assert digest(db) == before
