"""Every table the store holds, written every way a writer can: the incremental build sees it.

The tables are read from the schema of a real store (every migration applied), not from a list: a
table a later migration adds is in this test without anyone naming it. For each table and each way of
writing -- ``update``, ``insert or replace`` by a writer without recursive triggers (the sqlite3
shell's default), ``delete``, and a backup restored and then edited differently (the same change count
another edit reached) -- the run fingerprints (report/fingerprints.py) of the runs whose pages read the
row must move, from a build's kept figures as an incremental build reads them. Tables that no run page
reads (report/row_owners.py ``NOT_ON_RUN_PAGES``) are proven unread: their every text and number
changed, a build from scratch writes the same pages.

Real parts: SQLite files with the real migrations and triggers, generated runs (bench/report_data.py),
the real report step.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.fingerprints import code_fingerprint, run_fingerprints
from cardproof.report.queries import runs as stored_runs
from cardproof.report.row_owners import BY_USE, NOT_ON_RUN_PAGES, everywhere, owners, quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from report_data import Generator  # noqa: E402

WAYS = ("update", "replace", "delete", "restore_then_edit")


def _columns(conn, table: str) -> list[tuple[str, str, int]]:
    """(name, declared type, is primary key) per column."""
    return [(r[1], (r[2] or "").upper(), r[5]) for r in conn.execute(f"pragma table_info({quote(table)})")]


def _fill(conn, table: str, names: set[str], done: set[str]) -> None:
    """One row in ``table`` if it has none, its references pointing at rows of run 1 (parents first)."""
    if table in done:
        return
    done.add(table)
    refs = {r[3]: r[2] for r in conn.execute(f"pragma foreign_key_list({quote(table)})")}
    cols, values = [], []
    for name, kind, pk in _columns(conn, table):
        parent = refs.get(name) or (name[:-3] + "s" if name.endswith("_id") and name[:-3] + "s" in names else None)
        if parent and parent != table:
            _fill(conn, parent, names, done)
            first = conn.execute(f"select min(rowid) from {quote(parent)}").fetchone()[0]
            cols.append(name), values.append(first)
        elif name == "run_id":
            cols.append(name), values.append(1)
        elif pk and "INT" in kind:
            continue
        elif name.endswith("_json"):
            cols.append(name), values.append("{}")
        else:
            cols.append(name), values.append(1 if ("INT" in kind or "REAL" in kind) else "filled")
    if conn.execute(f"select count(*) from {quote(table)}").fetchone()[0]:
        return
    conn.execute(f"insert into {quote(table)} ({', '.join(map(quote, cols))}) values ({', '.join('?' * len(cols))})",
                 values)


def _editable(conn, table: str) -> str:
    """A column whose value a page could print: text or a number, no key, no reference."""
    names = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
    for name, kind, pk in _columns(conn, table):
        if pk or name == "run_id" or name.endswith("_id") and name[:-3] + "s" in names:
            continue
        if name in ("id",):
            continue
        return name
    raise AssertionError(f"{table}: no column to edit")


def _changed(value, salt: str):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value + (7 if salt == "a" else 11)
    return f"{value}-{salt}"


def _write(path: Path, table: str, rowid: int, way: str, backup: Path) -> None:
    """One write of ``way`` to row ``rowid`` of ``table``, through a plain sqlite3 connection (no
    recursive triggers, foreign keys off: the sqlite3 shell's defaults)."""
    conn = sqlite3.connect(path)
    try:
        col = _editable(conn, table)
        q = quote(table)
        value = conn.execute(f"select {quote(col)} from {q} where rowid = ?", [rowid]).fetchone()[0]
        if way == "update":
            conn.execute(f"update {q} set {quote(col)} = ? where rowid = ?", [_changed(value, "a"), rowid])
        elif way == "delete":
            conn.execute(f"delete from {q} where rowid = ?", [rowid])
        elif way == "replace":
            cols = [c for c, _, _ in _columns(conn, table)]
            row = dict(zip(cols, conn.execute(f"select {', '.join(map(quote, cols))} from {q} where rowid = ?",
                                              [rowid]).fetchone()))
            row[col] = _changed(value, "a")
            conn.execute(f"insert or replace into {q} (rowid, {', '.join(map(quote, cols))}) "
                         f"values (?, {', '.join('?' * len(cols))})", [rowid, *row.values()])
        elif way == "restore_then_edit":
            src = sqlite3.connect(backup)
            try:
                src.backup(conn)
            finally:
                src.close()
            conn.execute(f"update {q} set {quote(col)} = ? where rowid = ?", [_changed(value, "b"), rowid])
        conn.commit()
    finally:
        conn.close()


def _prints(db_path: Path, project: Path) -> dict[int, str]:
    store = open_store(db_path, mode="ro")
    try:
        return run_fingerprints(store.db, stored_runs(store.db), project, code_fingerprint())
    finally:
        store.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A store of three generated runs in which every table holds at least one row."""
    tmp = tmp_path_factory.mktemp("every-table")
    gen = Generator(tmp / "store.db", models=2, campaigns=2, log_lines=40, seed=5)
    gen.add(3)
    conn = sqlite3.connect(gen.path)
    try:
        names = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table' "
                                            "and name not like 'sqlite_%'")}
        done: set[str] = {"_sqlite_migrations", "row_changes"}
        for table in sorted(names):
            _fill(conn, table, names, done)
        conn.execute("update runs set registration_id = (select min(id) from registrations) where id = 1")
        conn.commit()
    finally:
        conn.close()
    return tmp, gen.path, sorted(names)


def _target(db_path: Path, table: str) -> tuple[int, set[int] | None]:
    """A row of ``table`` and the runs whose fingerprints it must move (None: every run)."""
    conn = sqlite3.connect(db_path)
    try:
        owned = owners(conn)
        q = quote(table)
        if table in owned:
            o = owned[table]
            rowid, run = conn.execute(f"select {q}.rowid, {o.run} from {q}{o.joins} where {o.run} is not null "
                                      f"order by {q}.rowid limit 1").fetchone()
            return rowid, {run}
        if table in everywhere(conn):
            return conn.execute(f"select min(rowid) from {q}").fetchone()[0], None
        if table == "campaigns":
            rowid = conn.execute("select campaign_id from runs where id = 1").fetchone()[0]
            return rowid, {r[0] for r in conn.execute("select id from runs where campaign_id = ?", [rowid])}
        if table == "registrations":
            return conn.execute("select registration_id from runs where id = 1").fetchone()[0], {1}
        if table == "models":
            rowid = conn.execute("select model_id from cells where run_id = 1 limit 1").fetchone()[0]
            return rowid, {r[0] for r in conn.execute("select distinct run_id from cells where model_id = ?", [rowid])}
        if table == "runs":
            return 1, {1}
        raise AssertionError(f"{table}: neither owned, by use, everywhere nor on no run page")
    finally:
        conn.close()


def test_every_table_is_placed():
    """Each table of a new store is owned by a run, shared by use, read everywhere or named as read by
    no run page; the ones a run's evidence lives in are owned."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "s.db")
        try:
            conn = store.db.conn
            names = set(store.db.table_names())
            owned, common = set(owners(conn)), set(everywhere(conn))
            placed = owned | common | set(BY_USE) | set(NOT_ON_RUN_PAGES) | {"runs"}
            assert names <= placed
            assert {"variants", "load_steps", "load_samples", "observed_requests", "gate_results", "facts",
                    "fit_checks", "requests_seen", "memory_load_pids", "cell_checks"} <= owned
            assert set(NOT_ON_RUN_PAGES) <= names
        finally:
            store.close()


@pytest.mark.parametrize("way", WAYS)
def test_every_write_to_a_read_table_moves_the_fingerprints_of_the_runs_that_read_it(world, tmp_path, way):
    base_dir, base, names = world
    missed = []
    for table in names:
        if table in NOT_ON_RUN_PAGES:
            continue
        db = tmp_path / f"{table}.db"
        shutil.copy(base, db)
        project = tmp_path / f"p-{table}"
        (project / "site").mkdir(parents=True)
        backup = tmp_path / f"{table}.backup.db"
        shutil.copy(base, backup)
        rowid, expected = _target(db, table)
        if way == "restore_then_edit":
            _write(db, table, rowid, "update", backup)  # the first edit, which the last build published
        before = _prints(db, project)  # kept figures in project/site, as an incremental build keeps them
        _write(db, table, rowid, way, backup)
        after = _prints(db, project)
        moved = {rid for rid in before if before[rid] != after.get(rid)}
        want = set(before) if expected is None else expected
        if not want <= moved:
            missed.append(f"{table}: runs {sorted(want - moved)} kept their fingerprints")
        for p in tmp_path.glob(f"{table}*.db*"):
            p.unlink()
        shutil.rmtree(project)
    assert not missed, f"{way}:\n" + "\n".join(missed)


def test_the_tables_no_run_page_reads_change_no_page(world, tmp_path):
    """Every text and number of every table named as read by no run page changed: the same pages."""
    _, base, names = world
    db = tmp_path / "store.db"
    shutil.copy(base, db)
    build(db, tmp_path / "before", run_mkdocs=False)
    conn = sqlite3.connect(db)
    try:
        for table in NOT_ON_RUN_PAGES:
            if table in ("row_changes", "_sqlite_migrations") or table not in names:
                continue
            for name, kind, pk in _columns(conn, table):
                if pk or name.endswith("_id"):
                    continue
                expr = f"{quote(name)} + 3" if ("INT" in kind or "REAL" in kind) else f"{quote(name)} || '-unread'"
                conn.execute(f"update {quote(table)} set {quote(name)} = {expr}")
        conn.commit()
    finally:
        conn.close()
    build(db, tmp_path / "after", run_mkdocs=False)

    def pages(root: Path) -> dict:
        # the runs' own pages (the runs index shows llama-bench imports, and is written on every build)
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "site" / "runs").rglob("run-*"))
                if p.is_file()}

    before, after = pages(tmp_path / "before"), pages(tmp_path / "after")
    assert len(before) >= 6 and before == after
