"""One bad row never stops a build: damaged values are reported and read as NULL.

Old databases (and rows written by hand, merged from elsewhere or by a
cardproof that did not yet check server answers) can hold text in a numeric
column, a non-finite or absurd number, or a ``*_json`` column that is not the
JSON its readers expect. Every report module reads rows through one
connection, so the check is done once, up front, in SQL:

* each bad value is named on stderr -- table, row id, column, what it holds;
* when there is any, the build reads from a copy of the database (a
  temporary file, made with SQLite's backup API) in which those values are
  NULL, shown as "—". The file itself is never written: the report opens it
  read-only, and a damaged value stays there as evidence.

Timestamps that are no date (``'abc'``, an access line's impossible
``2025/13/45 - 99:99:99``) are named too but kept: the date formatters show
such text as it is (``Lang.datetime``), and a row whose ``<column>_note``
states why is not reported again.

In short, ``tolerance.py``: damaged rows (text in numeric columns, invalid JSON)
named on stderr and read as NULL from a temporary copy; ``site/.cardproof-damage-checked.json``
remembers per table how far it was found clean (last rowid, row count, the last row's digest, the
store file's device and inode), so a later build scans only new rows unless those rows changed (row
counts from whole-table ``count(*)``, which SQLite answers from the smallest index; where the store
counts changed rows, ``row_changes``, the memo keeps that count below its last bucket instead, and
an old row edited by hand means a whole scan)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Callable

import sqlite_utils

from cardproof.daemon.store.migrations import ROW_CHANGE_BITS, counted_tables

#: Largest magnitude a REAL column may hold and still be read: far above any
#: real figure, far below where chart scales and ratios overflow.
MAX_REAL = 1e15
#: At most this many lines per table and column; the rest are counted.
MAX_LINES = 20
#: Not scanned: log_lines is by far the largest table (a scan costs about 3 µs a line, 1.5 s for
#: 500,000), only the importer writes it, from int() and the checked time formatters, and the
#: report prints its text, never computes with its numbers.
SKIP_TABLES = {"log_lines"}

# JSON columns whose readers take an array or an object; any other *_json column only has to be JSON.
_ARRAYS = {"samples_ns_json", "samples_ts_json", "arms_json", "line_ids_json"}
_OBJECTS = {"request_json", "response_json", "server_props_json", "gpus_json", "host_json", "detail_json",
            "exchange_json", "value_json", "items_json", "per_device_json", "capabilities_json"}
#: JSON objects in a column whose name does not say so (the capabilities a model declared, m007)
_JSON_NAMED = {("capabilities", "json")}


def _affinity(decl: str) -> str:
    """SQLite's column affinity from the declared type (datatype3.html, section 3.1)."""
    d = (decl or "").upper()
    if "INT" in d:
        return "integer"
    if any(k in d for k in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if not d or "BLOB" in d:
        return "blob"
    if any(k in d for k in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _checks(table: str, columns: list[tuple]) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """``({column: (bad-value SQL, reason)}, {column: not-a-date SQL})`` for one table."""
    names = {c[1] for c in columns}
    bad: dict[str, tuple[str, str]] = {}
    dates: dict[str, str] = {}
    for _, name, decl, _, _, pk in columns:
        c = _q(name)
        aff = _affinity(decl)
        if aff in ("integer", "real", "numeric") and not (pk and aff == "integer"):
            bad[name] = (f"(typeof({c}) not in ('integer', 'real', 'null') or "
                         f"(typeof({c}) = 'real' and abs({c}) > {MAX_REAL!r}))", "not a number in range")
        elif aff == "text" and (name.endswith("_json") or (table, name) in _JSON_NAMED):
            want = "array" if name in _ARRAYS else ("object" if name in _OBJECTS or (table, name) in _JSON_NAMED else None)
            shape = f"json_type({c}) <> '{want}'" if want else "0"
            bad[name] = (f"({c} is not null and (typeof({c}) <> 'text' or "
                         f"case when json_valid({c}) then {shape} else 1 end))",
                         f"not valid JSON{' ' + want if want else ''}")
        elif aff == "text" and (name.endswith("_at") or name == "ts"):
            note = f" and {_q(name + '_note')} is null" if name + "_note" in names else ""
            # julianday() takes 2025-02-30 as 2025-03-02: the date part must come back unchanged
            dates[name] = (f"({c} is not null{note} and (julianday({c}) is null or "
                           f"date(julianday(substr({c}, 1, 10))) is not substr({c}, 1, 10)))")
    return bad, dates


def _shown(value) -> str:
    text = repr(value) if isinstance(value, (str, bytes)) else str(value)
    return text[:80] + ("…" if len(text) > 80 else "")


@contextlib.contextmanager
def shielded(store, warn: Callable[[str], None] | None = None, checked: Path | None = None):
    """While inside, ``store.db`` reads the database with every damaged value as NULL.

    Cheap when nothing is wrong: one scan per table, and ``store.db`` stays
    the file's own connection. Yields how many values were reported.
    ``checked`` is a file that remembers how far each table was found clean
    (see :func:`find_damage`); a build passes one beside its pages.
    """
    warn = warn or (lambda line: print(line, file=sys.stderr))
    memo = _read_checked(checked, store.path) if checked is not None else None
    damaged = find_damage(store.db.conn, warn, memo)
    if checked is not None:
        _write_checked(checked, store.path, memo)
    if not damaged:
        yield 0
        return
    original = store.db
    with tempfile.TemporaryDirectory(prefix="cardproof-report-") as tmp:
        conn = sqlite3.connect(str(Path(tmp) / "shielded.db"))
        try:
            original.conn.backup(conn)
            with conn:
                for (table, column), sql in damaged.items():
                    conn.execute(f"update main.{_q(table)} set {_q(column)} = null where {sql}")
            store.db = sqlite_utils.Database(conn)
            yield len(damaged)
        finally:
            store.db = original
            conn.close()


def find_damage(conn, warn: Callable[[str], None], checked: dict | None = None) -> dict[tuple[str, str], str]:
    """Name every damaged value on ``warn``; ``{(table, column): SQL condition}`` of the ones to read as NULL.

    ``checked`` (table -> where it was last found clean, updated here) lets a
    build after one new run scan only the rows added since: at 1,000 runs the
    whole scan took 3.4 s of every build, most of it parsing JSON columns of
    rows that had not changed. A table's memo holds only while the rows up to
    it are still there, as many and the last one unchanged; otherwise, or
    when the new rows hold any damage, the whole table is scanned and named
    as before. (A value edited by hand in a row checked before is not seen
    until the store file is another one or the memo is gone.)
    """
    tables = [r[0] for r in conn.execute(
        "select name from main.sqlite_master where type = 'table' and name not like 'sqlite_%' order by name")]
    out: dict[tuple[str, str], str] = {}
    counted = counted_tables(conn)
    for table in (t for t in tables if t not in SKIP_TABLES):
        columns = conn.execute(f"pragma main.table_info({_q(table)})").fetchall()
        bad, dates = _checks(table, columns)
        if not bad and not dates:
            continue
        # one pass over the table (or its rows after the memo) finds whether any check fires at all
        every = " or ".join([sql for sql, _ in bad.values()] + list(dates.values()))
        memo = checked.pop(table, None) if checked is not None else None
        after = max(0, _clean_upto(conn, table, memo, counted))
        if conn.execute(f"select 1 from main.{_q(table)} where rowid > ? and ({every}) limit 1",
                        [after]).fetchone() is None:
            if checked is not None:
                checked[table] = _memo(conn, table, counted)
            continue
        for name, (sql, reason) in bad.items():
            if _report(conn, warn, table, name, sql, f"{reason}, read as NULL"):
                out[(table, name)] = sql
        for name, sql in dates.items():
            _report(conn, warn, table, name, sql, "not a date, shown as it is")
    return out


def _row_digest(conn, table: str, rowid: int) -> str | None:
    row = conn.execute(f"select * from main.{_q(table)} where rowid = ?", [rowid]).fetchone()
    return hashlib.sha256(repr(row).encode()).hexdigest() if row is not None else None


def _changes_below(conn, table: str, counted: set[str], bucket: int) -> int | str | None:
    """The store's record of writes to ``table`` below ``bucket`` (of rowids, daemon/store/migrations.py
    follow_rows: counts and salts, as a digest; a count where the store keeps no salts), or None where
    it keeps no such record."""
    if table not in counted:
        return None
    cols = {r[1] for r in conn.execute("pragma main.table_info(row_changes)")}
    if "salt" not in cols:
        return conn.execute("select coalesce(sum(n), 0) from main.row_changes where tbl = ? and bucket < ?",
                            [table, bucket]).fetchone()[0]
    # with the salts each write leaves (daemon/store/migrations.py follow_rows): a store restored from a backup
    # and edited again reaches an old count, never an old salt
    rows = conn.execute("select bucket, n, salt from main.row_changes where tbl = ? and bucket < ? order by bucket",
                        [table, bucket]).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _memo(conn, table: str, counted: set[str] = frozenset()) -> dict:
    """Where ``table`` was found clean: its last rowid, the rows up to it, the last row's digest; where
    the store counts changed rows, instead the count below the last rowid's bucket."""
    # two queries, not one: alone, each is answered from the b-tree's edge or its smallest index (at a
    # year of runs 0.01 s for the log lines, against 0.13 s for both in one statement, which scans)
    upto = conn.execute(f"select coalesce(max(rowid), 0) from main.{_q(table)}").fetchone()[0]
    changes = _changes_below(conn, table, counted, upto >> ROW_CHANGE_BITS)
    if changes is not None:  # no row count needed: the change count says whether old rows moved
        return {"upto": upto, "changes_below": changes, "bits": ROW_CHANGE_BITS}
    rows = conn.execute(f"select count(*) from main.{_q(table)}").fetchone()[0]
    return {"upto": upto, "rows": rows, "last": _row_digest(conn, table, upto) if upto else None}


def _clean_upto(conn, table: str, memo, counted: set[str] = frozenset()) -> int:
    """The rowid up to which ``table`` is known clean: 0 unless the memo still describes these rows.

    Where the store counts changed and deleted rows per bucket of rowids, the buckets below the memo's
    last one are clean while their count is the same (a value edited by hand is counted too; a new
    run's rows updated during its capture are in later buckets); the last bucket is looked at again.
    Otherwise the row count and the last row's digest must be the same."""
    if isinstance(memo, dict) and "changes_below" in memo:
        try:
            upto, bits = int(memo["upto"]), int(memo["bits"])
        except (TypeError, KeyError, ValueError):
            return 0
        if upto <= 0 or bits != ROW_CHANGE_BITS:
            return 0
        same = memo["changes_below"] == _changes_below(conn, table, counted, upto >> bits)
        return ((upto >> bits) << bits) - 1 if same else 0
    try:
        upto, rows, last = int(memo["upto"]), int(memo["rows"]), memo["last"]
    except (TypeError, KeyError, ValueError):
        return 0
    if upto <= 0:
        return 0
    # the rows up to ``upto``: all rows less those after it (a count of the whole table is answered from
    # its smallest index; one bounded by rowid reads every row up to the bound)
    total = conn.execute(f"select count(*) from main.{_q(table)}").fetchone()[0]
    if total - conn.execute(f"select count(*) from main.{_q(table)} where rowid > ?", [upto]).fetchone()[0] != rows:
        return 0
    return upto if _row_digest(conn, table, upto) == last else 0


def _store_id(path) -> list[int] | None:
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return None
    return [st.st_dev, st.st_ino]


def _read_checked(path: Path, store_path) -> dict:
    """The memo of the store file at ``store_path``; empty for another file, a missing or damaged memo."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("store") != _store_id(store_path) or data["store"] is None:
        return {}
    tables = data.get("tables")
    return dict(tables) if isinstance(tables, dict) else {}


def _write_checked(path: Path, store_path, memo: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"store": _store_id(store_path), "tables": memo}, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # no memo: the next build scans every table again


def _report(conn, warn, table: str, column: str, sql: str, reason: str) -> int:
    rows = conn.execute(f"select rowid, {_q(column)} from main.{_q(table)} where {sql} order by rowid "
                        f"limit {MAX_LINES + 1}").fetchall()
    if not rows:
        return 0
    total = len(rows)
    if total > MAX_LINES:
        total = conn.execute(f"select count(*) from main.{_q(table)} where {sql}").fetchone()[0]
    for rowid, value in rows[:MAX_LINES]:
        warn(f"report: {table} row {rowid}: {column} {reason}: {_shown(value)}")
    if total > MAX_LINES:
        warn(f"report: {table}: {total - MAX_LINES} more rows with a bad {column}")
    return total
