"""Opening the store's file: is it ours, the write lock, WAL, migrations that wait instead of failing.

Several processes share one database (the daemon, ``cardproof run``,
``cardproof logs import``, readers). Every connection waits for the write
lock (busy timeout) instead of failing, every write transaction takes the
lock when it begins (``BEGIN IMMEDIATE``: a transaction that read first and
then writes would fail at once, without waiting, when another process wrote
in between), and migrations run inside one such transaction, so processes
creating the same new file at once all succeed.

A file is ours when its ``_sqlite_migrations`` table (sqlite-utils'
record of applied migrations) lists migrations of the ``cardproof`` set.
A file with tables and no such record belongs to something else and is
never written to; one that lists migrations this code does not know comes
from a newer cardproof and is not written to either.

In short, ``storefile.py``: also ``connect_readonly(path)``: the one read-only open
of a store file (URI from ``Path.as_uri()``, so ``#``, ``?`` or ``%`` in a folder name cannot open
another file)
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from cardproof import __version__

BUSY_TIMEOUT_S = 30.0  # per statement: waiting for another writer beats failing
MIGRATIONS_TABLE = "_sqlite_migrations"  # sqlite-utils' Migrations.migrations_table


class StoreError(Exception):
    """The database cannot be opened or written; the message names the file."""


def shown(path: Path | str) -> str:
    """The path for a one-line message: control characters escaped."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], str(path))


def version_number(version: str = __version__) -> int:
    """``1.2.3`` as 1002003: what ``PRAGMA user_version`` records of the newest cardproof that migrated a file."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]


def version_text(number: int) -> str:
    return f"{number // 1_000_000}.{number // 1_000 % 1_000}.{number % 1_000}"


def is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Database(sqlite_utils.Database):
    """sqlite-utils' Database whose own transactions take the write lock when they begin.

    sqlite-utils opens its transactions with a plain (deferred) ``BEGIN`` and
    reads the table's columns before it inserts; if another process commits
    in between, SQLite refuses the write at once ("database is locked")
    instead of waiting. ``BEGIN IMMEDIATE`` waits for the lock up front.
    """

    @contextlib.contextmanager
    def atomic(self):
        if self.conn.in_transaction:
            with super().atomic():  # a savepoint inside the caller's transaction
                yield self
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            self.rollback()
            raise
        else:
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                self.rollback()
                raise


def begin_immediate(conn: sqlite3.Connection, *, wait_s: float = BUSY_TIMEOUT_S,
                    on_wait=None) -> None:
    """Take the write lock, waiting up to ``wait_s`` seconds in all (the busy timeout is per try)."""
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
            if on_wait is not None and not told:
                on_wait()
                told = True
            time.sleep(0.05)


@dataclass
class FileState:
    kind: str  # empty | ours
    applied: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # ours, older: migrations this code would apply
    unknown: list[str] = field(default_factory=list)  # ours, newer: migrations this code does not know
    user_version: int = 0


def inspect(conn: sqlite3.Connection, path: Path, migrations) -> FileState:
    """What the file is, read without writing; StoreError when it is not ours."""
    objects = [r[0] for r in conn.execute(
        "select name from sqlite_master where name not like 'sqlite\\_%' escape '\\'")]
    if not objects:
        return FileState("empty")
    applied = None
    if MIGRATIONS_TABLE in objects:
        try:
            applied = [r[0] for r in conn.execute(
                f"select name from {MIGRATIONS_TABLE} where migration_set = ? order by rowid", [migrations.name])]
        except sqlite3.OperationalError:  # a table of that name with other columns: not sqlite-utils' record
            applied = None
    if not applied:
        raise StoreError(
            f"{shown(path)}: not a cardproof database: it holds {len(objects)} tables or indexes but no record "
            f"of cardproof migrations ({MIGRATIONS_TABLE}); left untouched"
        )
    known = [m.name for m in migrations._migrations]
    done = set(applied)
    return FileState(
        "ours",
        applied=applied,
        pending=[n for n in known if n not in done],
        unknown=[n for n in applied if n not in set(known)],
        user_version=conn.execute("pragma user_version").fetchone()[0],
    )


def inspect_file(path: Path, migrations) -> FileState:
    """:func:`inspect` on a connection of its own that creates nothing beside the file.

    Reading a WAL-mode file makes SQLite create its -wal and -shm files. A
    WAL-mode file without a -wal file holds all its data itself, so it is
    read as immutable (no locks, no side files): a file that turns out not
    to be ours is left exactly as it was, directory included.

    Whether the file is in WAL mode is read from its header with a
    descriptor of our own only where that is harmless (:func:`_wal_without_wal_file`):
    closing any descriptor of a file drops every POSIX lock this process
    holds on it, SQLite's included. A connection of this process that
    loses its lock on a WAL database looks gone to the others: the next
    process to close its own connection takes the file for its last user,
    deletes -wal and -shm, and every commit after that goes into the
    deleted -wal, seen by no one and lost when the process ends.
    """
    if path.stat().st_size == 0:
        return FileState("empty")
    conn = connect_leaving_nothing(path)
    try:
        return inspect(conn, path, migrations)
    finally:
        conn.close()


def connect_leaving_nothing(path: Path, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A read-only connection that creates no -wal or -shm beside the file (see :func:`inspect_file`):
    for readers that may run before anyone has said the file is ours (the build gate)."""
    path = Path(path)
    immutable = _wal_without_wal_file(path, path.stat())
    return sqlite3.connect(path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro"),
                           uri=True, timeout=timeout)


# Held while this module opens a connection and while inspect_file has a descriptor of its own
# on a file: a connection another thread opens meanwhile is either seen or opened after it is closed.
_OPENING = threading.Lock()


def connect(database: str, **kwargs) -> sqlite3.Connection:
    """``sqlite3.connect``, never while :func:`inspect_file` holds a descriptor of its own on a file."""
    with _OPENING:
        return sqlite3.connect(database, **kwargs)


def connect_readonly(path: Path | str, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A read-only connection to the database file at ``path``.

    The URI comes from :meth:`Path.as_uri`, which percent-encodes: a ``file:{path}`` string would
    cut the path at a ``#`` or ``?`` in a folder name, or decode a ``%41`` in it, and open
    another file (or a new empty one) instead of the store.
    """
    return connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, timeout=timeout)


def _wal_without_wal_file(path: Path, st: os.stat_result) -> bool:
    """A WAL-mode file with no -wal beside it (nobody has it open), its header read without dropping a lock.

    The header is read only when no -wal file exists (a WAL database in
    use always has one) and no descriptor of this process is open on the
    file (no connection of ours can hold a lock there); otherwise the
    answer is False and the file is read through SQLite, which creates
    nothing new beside a file already in use.
    """
    if Path(f"{path}-wal").exists():
        return False
    with _OPENING:
        if _open_in_this_process(st):
            return False
        try:
            with open(path, "rb") as f:
                head = f.read(20)
        except OSError:
            return False
    return head[:16] == b"SQLite format 3\x00" and head[18:20] == b"\x02\x02"


def _open_in_this_process(st: os.stat_result) -> bool:
    """Whether this process has a descriptor open on the file ``st`` describes (True when it cannot tell)."""
    for fd_dir in ("/proc/self/fd", "/dev/fd"):
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for name in fds:
            try:
                other = os.fstat(int(name))
            except (OSError, ValueError):
                continue  # the listing's own descriptor, closed by now
            if other.st_ino == st.st_ino and other.st_dev == st.st_dev:
                return True
        return False
    return True


def newer_message(path: Path, state: FileState) -> str:
    needed = (f"cardproof {version_text(state.user_version)} or later"
              if state.user_version > version_number() else "a newer cardproof")
    return (f"{shown(path)}: written by a newer cardproof (migrations this version does not know: "
            f"{', '.join(state.unknown)}); cardproof {__version__} does not write to it: it needs {needed}")


def ensure_wal(conn: sqlite3.Connection, *, wait_s: float = BUSY_TIMEOUT_S) -> None:
    """Switch the file to WAL; several processes racing to do it on a new file take turns."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if conn.execute("pragma journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("pragma journal_mode=wal").fetchall()
            return
        except sqlite3.OperationalError as exc:
            # the switch needs the file to itself; it may return "locked" without waiting
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


#: the schema every migration ends in, by migration set: the CREATE statements in an order that runs
#: (tables, indexes, views, triggers) and the rows the migrations leave (their own record)
_WHOLE: dict[tuple, tuple[list[str], list[tuple[str, list[str], list[tuple]]]]] = {}


def _whole_schema(database_class, migrations) -> tuple[list[str], list[tuple[str, list[str], list[tuple]]]]:
    """Every migration applied once per process, to a database in memory, and read back as SQL."""
    key = (migrations.name, tuple((m.name, m.fn) for m in migrations._migrations))
    if key not in _WHOLE:
        ref = database_class(memory=True)
        try:
            migrations.apply(ref)
            order = {"table": 0, "index": 1, "view": 2, "trigger": 3}
            objects = ref.conn.execute(
                "select type, name, sql from sqlite_master where sql is not null "
                "and name not like 'sqlite\\_%' escape '\\' order by rowid").fetchall()
            statements = [sql for _, _, sql in sorted(objects, key=lambda o: order.get(o[0], 4))]
            rows = []
            for kind, name, _ in objects:
                if kind != "table":
                    continue
                cur = ref.conn.execute('select * from "' + name.replace('"', '""') + '"')
                got = cur.fetchall()
                if got:
                    rows.append((name, [d[0] for d in cur.description], got))
        finally:
            ref.conn.close()
        _WHOLE[key] = (statements, rows)
    return _WHOLE[key]


def _create_whole(conn: sqlite3.Connection, database_class, migrations) -> None:
    """A new file gets the schema the migrations end in at once, inside the caller's transaction.

    Applying 31 migrations one by one (sqlite-utils reads the schema again at each added column) took
    about 50 ms a new file; the statements are those the same migrations wrote into a database in
    memory, so the file is the one they would make (tests/test_migrations.py pins both ways to one
    schema). The migrations' record says when this file got them."""
    import datetime

    statements, rows = _whole_schema(database_class, migrations)
    now = str(datetime.datetime.now(datetime.timezone.utc))
    for sql in statements:
        conn.execute(sql)
    for table, columns, values in rows:
        if table == MIGRATIONS_TABLE and "applied_at" in columns:
            at = columns.index("applied_at")
            values = [(*v[:at], now, *v[at + 1:]) for v in values]
        quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        conn.executemany(f'insert into "{table}" ({quoted}) values ({", ".join("?" * len(columns))})', values)


def migrate(db: sqlite_utils.Database, path: Path, migrations, *, wait_s: float = BUSY_TIMEOUT_S) -> list[str]:
    """Apply pending migrations inside one write transaction; returns the names applied.

    What the file holds is read again under the lock: another process may
    have migrated it, or made it something else, since it was first looked at.
    """
    conn = db.conn
    begin_immediate(conn, wait_s=wait_s)
    try:
        state = inspect(conn, path, migrations)
        if state.unknown:
            raise StoreError(newer_message(path, state))
        applied = [m.name for m in migrations._migrations] if state.kind == "empty" else state.pending
        if state.kind == "empty":
            _create_whole(conn, type(db), migrations)
        elif applied:
            migrations.apply(db)  # sqlite-utils nests each migration as a savepoint of this transaction
        if applied:
            conn.execute(f"pragma user_version = {max(state.user_version, version_number())}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return applied
