"""The SQLite store: one WAL file, schema changes only through the migrations in ``migrations.py``."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import sqlite_utils

from cardproof.daemon.store.migrations import migrations
from cardproof.daemon.store.file import (BUSY_TIMEOUT_S, Database, StoreError, begin_immediate, ensure_wal,
                                         inspect, inspect_file)
from cardproof.daemon.store.file import connect, migrate, newer_message, shown

__all__ = ["Store", "StoreError", "dumps", "json_text", "migrations", "open_store", "utcnow"]


def utcnow() -> str:
    """ISO-8601 UTC timestamp with microseconds, the one format used in the store."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Store:
    """Thin wrapper over a migrated sqlite-utils Database.

    ``readonly``: opened with ``mode="ro"``; every write fails.
    ``newer_migrations``: migrations in the file this code does not know
    (a newer cardproof wrote it; only a read-only open gets this far).
    ``upgraded``: migrations this open applied to an older file.
    """

    def __init__(self, path: Path, db: sqlite_utils.Database, *, readonly: bool = False,
                 newer_migrations: list[str] | None = None, upgraded: list[str] | None = None):
        self.path = path
        self.db = db
        self.readonly = readonly
        self.newer_migrations = newer_migrations or []
        self.upgraded = upgraded or []

    @contextlib.contextmanager
    def write_lock(self, *, wait_s: float = BUSY_TIMEOUT_S, on_wait=None):
        """One write transaction that holds the lock from its start: read-then-write inside it is safe.

        Commits at the end, rolls back on an exception. ``wait_s`` is how long
        to wait for another writer in all; ``on_wait`` is called once if it
        has to wait. Inside a transaction of the caller's (which holds the
        lock already: every transaction on a writable store begins IMMEDIATE)
        it is a savepoint of that transaction, and the caller commits.
        """
        conn = self.db.conn
        if conn.in_transaction:
            with self.db.atomic():
                yield conn
            return
        try:
            begin_immediate(conn, wait_s=wait_s, on_wait=on_wait)
        except sqlite3.Error as exc:
            raise StoreError(f"{shown(self.path)}: cannot write: {exc}") from exc
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        else:
            conn.commit()

    # -- runs -------------------------------------------------------------
    def insert(self, table: str, row: dict) -> int:
        """Insert one row and commit at once: a crash never loses a taken sample."""
        try:
            with self.db.conn:
                return self.db[table].insert(_as_json(row)).last_pk
        except sqlite3.Error as exc:
            raise StoreError(f"{shown(self.path)}: cannot write to table {table}: {exc}") from exc

    def update(self, table: str, pk: int, values: dict) -> None:
        try:
            with self.db.conn:
                self.db[table].update(pk, _as_json(values))
        except sqlite3.Error as exc:
            raise StoreError(f"{shown(self.path)}: cannot update {table} {pk}: {exc}") from exc

    def upsert_model(self, row: dict) -> int:
        """Return the id of the model with this name and digest, inserting it if new.

        Looked up and inserted under one write lock: two processes registering
        the same model at once end with one row.
        """
        try:
            with self.write_lock() as conn:
                found = conn.execute(
                    "select id from models where name = ? and coalesce(digest, '') = ? order by id limit 1",
                    [row["name"], row.get("digest") or ""],
                ).fetchone()
                if found:
                    self._fill_shape(conn, found[0], row)
                    return found[0]
                return self.db["models"].insert(row).last_pk
        except sqlite3.Error as exc:
            raise StoreError(f"{shown(self.path)}: cannot write to table models: {exc}") from exc

    #: columns of a model's shape (m023) that a row registered before them lacks
    SHAPE_COLUMNS = ("params", "active_params", "expert_count", "expert_used_count", "basename", "tokenizer_sha256")

    def _fill_shape(self, conn, model_id: int, row: dict) -> None:
        """Give a model row registered before m023 the shape its header states now (same name, same digest:
        the same file), so its next run's findings can group it; a column already set is left as stored."""
        known = {k: row[k] for k in self.SHAPE_COLUMNS if row.get(k) is not None}
        if not known:
            return
        have = conn.execute(f"select {', '.join(known)} from models where id = ?", [model_id]).fetchone()
        missing = {k: v for (k, v), stored in zip(known.items(), have) if stored is None}
        if missing:
            conn.execute(f"update models set {', '.join(f'{k} = ?' for k in missing)} where id = ?",
                         [*missing.values(), model_id])

    def close(self) -> None:
        self.db.close()


def open_store(path: Path | str, *, create: bool = True, mode: str = "rw") -> Store:
    """Open the store at ``path``: ``mode="rw"`` (migrated, writable) or ``"ro"`` (read-only).

    ``rw`` creates the file when ``create`` and it does not exist, and applies
    pending migrations under the write lock. ``ro`` never creates a file and
    opens it read-only; a file of an older cardproof is first upgraded (it is
    recognisably ours, and the same migrations would be applied by the next
    write), one of a newer cardproof is read as it is (``newer_migrations``).

    Raises StoreError with the file named when it is not a SQLite database,
    not a cardproof database (tables, but no cardproof migrations: never
    written to), from a newer cardproof (``rw``), or cannot be created.
    """
    path = Path(path)
    if mode not in ("rw", "ro"):
        raise ValueError(f"mode must be rw or ro, not {mode!r}")
    if (mode == "ro" or not create) and not path.exists():
        raise StoreError(f"{shown(path)}: no such database")
    if path.exists() and path.is_dir():
        raise StoreError(f"{shown(path)}: is a directory, not a database")
    try:
        if mode == "ro":
            return _open_ro(path)
        return _open_rw(path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{shown(path)}: cannot open database: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"{shown(path)}: cannot open database: {exc}") from exc


def _open_rw(path: Path) -> Store:
    if path.exists():
        inspect_file(path, migrations)  # a file that is not ours is refused before anything is created beside it
    path.parent.mkdir(parents=True, exist_ok=True)
    # implicit transactions (before an INSERT/UPDATE) also take the write lock when they begin
    conn = connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level="IMMEDIATE")
    try:
        state = inspect(conn, path, migrations)  # before anything is written: a file not ours stays as it is
        if state.unknown:
            raise StoreError(newer_message(path, state))
        ensure_wal(conn)
        db = Database(conn)
        db.execute("PRAGMA foreign_keys=ON")
        upgraded = migrate(db, path, migrations) if state.kind == "empty" or state.pending else []
    except BaseException:
        conn.close()
        raise
    return Store(path, db, upgraded=upgraded if state.kind == "ours" else [])


def _open_ro(path: Path) -> Store:
    inspect_file(path, migrations)  # a file that is not ours is refused before anything is created beside it
    # as a URI: percent-encoded, so '?', '#' or '%' in a file name stay part of the name
    conn = connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        state = inspect(conn, path, migrations)
        if state.kind == "empty":
            raise StoreError(f"{shown(path)}: empty database, nothing cardproof wrote (a write command "
                             "such as cardproof run creates its tables)")
        upgraded = []
        if state.pending:
            conn.close()
            try:
                _open_rw(path).close()
            except (StoreError, sqlite3.Error, OSError) as exc:
                raise StoreError(
                    f"{shown(path)}: made by an older cardproof and could not be upgraded "
                    f"(pending migrations {', '.join(state.pending)}): {exc}"
                ) from exc
            upgraded = state.pending
            conn = connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            state = inspect(conn, path, migrations)
        db = sqlite_utils.Database(conn)
    except BaseException:
        conn.close()
        raise
    return Store(path, db, readonly=True, newer_migrations=state.unknown, upgraded=upgraded)


def dumps(obj) -> str:
    """Compact JSON for columns that keep raw evidence (standard JSON only: see :func:`json_text`)."""
    return json_text(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def json_value(text, kind: type | tuple[type, ...] | None = None, default=None):
    """A JSON column's value, read as tolerantly as the report reads every row: ``default`` where the column
    is NULL or empty, is not JSON (an old or damaged row, one nested past the parser's depth), or holds a
    value that is not of ``kind``. The one way a stored JSON column is read where a bad row must not stop
    the reader."""
    if not text:
        return default
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return default
    return value if kind is None or isinstance(value, kind) else default


#: the key under which a stored object names the values JSON has no number for (see json_text)
NON_FINITE_KEY = "_non_finite"


def json_text(obj, **kw) -> str:
    """``json.dumps(obj, **kw)`` as standard JSON, the one way JSON is written to the store.

    Python writes a float NaN or infinity as ``NaN`` / ``Infinity``, which no
    JSON reader but Python's takes: SQLite's ``json_valid`` refuses the row, so
    the report read it as damaged and dropped it, and the public database
    carried it on. A server can send them (llama-server's ``timings`` of an
    answer with no tokens), and what it sent is evidence: each such value is
    stored as ``null``, and an object names it under ``_non_finite`` as
    ``{"responses[0].timings.prompt_per_second": "NaN"}``. A list or a single
    number has no place for that note; its values are ``null`` all the same.
    """
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        found: dict[str, str] = {}
        clean = _finite(obj, "", found)
        if not found:
            raise  # not a number's fault (a circular reference): as json.dumps says
        if isinstance(clean, dict):
            note = clean.get(NON_FINITE_KEY)
            clean[NON_FINITE_KEY] = (note if isinstance(note, dict) else {}) | found
        return json.dumps(clean, allow_nan=False, **kw)


def _finite(value, path: str, found: dict):
    """``value`` with every non-finite float replaced by None, each one's path and text in ``found``."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            found[path or "$"] = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return None
        return value
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def _as_json(row: dict) -> dict:
    """A row whose dict and list values sqlite-utils would write as JSON itself (NaN and all): as standard JSON."""
    if not any(isinstance(v, (dict, list, tuple)) for v in row.values()):
        return row
    return {k: dumps(v) if isinstance(v, (dict, list, tuple)) else v for k, v in row.items()}
