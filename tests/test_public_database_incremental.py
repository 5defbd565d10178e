"""After one new run, the published database masks only the rows that changed, and ends up the same.

Real SQLite files: a store with a log table of many lines and a campaign
table, published once whole, then changed the ways a new run and later
captures change a store (new lines, an old line's text updated to hold an
address and a key, a masked row cleaned, a row deleted, a write that
changes no value). After each change the incremental copy must hold exactly
what a copy made from scratch holds, no raw address or key in any byte of
the file, and the masking code must have seen only the rows that changed.
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from cardproof.report import exports, privacy
from cardproof.report.exports import DATABASE_NAME, public_database, write_public_database

ADDRESS, SECRET = "192.168.77.14", "sk-live-0123456789abcdefXYZ"


def _dump(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' order by name")]
        return {n: conn.execute(f'select rowid, * from "{n}" order by rowid').fetchall() for n in names}
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store.db"
    conn = sqlite3.connect(path)
    conn.execute("pragma journal_mode = wal")
    conn.execute("create table log_lines (id integer primary key, load_id integer, text text, raw blob)")
    conn.execute("create table campaigns (id integer primary key, toml_text text)")
    conn.executemany("insert into log_lines (load_id, text) values (?, ?)",
                     [(i % 7, f"srv  log_server_r: request: POST /completion 127.0.0.1 200 line {i}") for i in range(3000)])
    conn.execute("insert into log_lines (text) values (?)", [f"request from {ADDRESS}:51234 POST /v1/chat"])
    conn.execute("insert into log_lines (text, raw) values ('bytes', ?)", [b"\x1b[34mcoloured\x1b[0m"])
    conn.execute("insert into campaigns (toml_text) values (?)", [f'[campaign]\napi_key = "{SECRET}"\n'])
    # a big table after the changed ones: a change in one table must not make another's rows masked again
    conn.execute("create table gate_results (id integer primary key, gate text, observed text)")
    conn.executemany("insert into gate_results (gate, observed) values ('length_limit', ?)",
                     [(f"stopped at {i} tokens",) for i in range(3000)])
    conn.commit()
    yield path, conn
    conn.close()


def _publish(path, docs):
    return write_public_database(path, docs)


def _published(path, tmp_path):
    """The store published once: the site folder and the copy's path."""
    docs = tmp_path / "site"
    _publish(path, docs)
    return docs, docs / "downloads" / DATABASE_NAME


def _from_scratch(path, tmp_path):
    fresh = tmp_path / "fresh" / DATABASE_NAME
    fresh.parent.mkdir(exist_ok=True)
    fresh.unlink(missing_ok=True)
    public_database(path, fresh)
    return _dump(fresh)


def test_each_change_gives_the_copy_a_whole_build_gives(store, tmp_path, monkeypatch):
    path, conn = store
    docs = tmp_path / "site"
    assert _publish(path, docs) == [docs / "downloads" / DATABASE_NAME]
    dst = docs / "downloads" / DATABASE_NAME
    assert _dump(dst) == _from_scratch(path, tmp_path)
    calls = []
    real = privacy.public_text
    monkeypatch.setattr(exports, "public_text", lambda t, **k: calls.append(t) or real(t, **k))

    changes = [
        ("insert into log_lines (load_id, text) values (9, ?)", [f"a new run's line from {ADDRESS}"]),
        ("update log_lines set text = ? where id = 5", [f"Authorization: Bearer {SECRET} from {ADDRESS}"]),
        ("update log_lines set text = 'cleaned' where text like 'request from%'", []),
        ("delete from log_lines where id = 7", []),
        ("update log_lines set load_id = 99 where id = 11", []),  # a number only: nothing to mask in it
        ("update campaigns set toml_text = toml_text || '# again' || char(10)", []),
    ]
    for sql, args in changes:
        calls.clear()
        # the build's shortcut reads the store's file sizes and times; a write inside the same
        # kernel clock tick as the last build, after a WAL reset, can look like none (a run takes seconds)
        time.sleep(0.05)
        conn.execute(sql, args)
        conn.commit()
        assert _publish(path, docs) == [dst], sql
        # only changed rows and rows masked before were looked at, not the 3,000 lines
        assert 0 < len(calls) < 20, (sql, len(calls))
        assert _dump(dst) == _from_scratch(path, tmp_path), sql
        raw = dst.read_bytes()
        assert ADDRESS.encode() not in raw and SECRET.encode() not in raw, sql


def test_a_write_that_changes_no_value_leaves_the_file_as_it_was(store, tmp_path):
    path, conn = store
    docs, dst = _published(path, tmp_path)
    before = dst.stat().st_mtime_ns, dst.read_bytes()
    time.sleep(0.05)
    conn.execute("update log_lines set text = text where id < 100")
    conn.commit()
    assert _publish(path, docs) == []
    assert (dst.stat().st_mtime_ns, dst.read_bytes()) == before


@pytest.mark.parametrize("spoil", ["copy", "record", "masking"])
def test_a_copy_or_record_that_cannot_be_trusted_is_made_whole(store, tmp_path, monkeypatch, spoil):
    """A copy changed behind the record's back, a damaged record, or other masking code: every row masked."""
    path, conn = store
    docs, dst = _published(path, tmp_path)
    if spoil == "copy":  # someone put the raw store in its place
        dst.write_bytes(path.read_bytes())
    elif spoil == "record":
        (docs / ".cardproof-database.json").write_text("{not json")
    else:
        monkeypatch.setattr(exports, "_masking", lambda: "other masking code")
    time.sleep(0.05)
    conn.execute("insert into log_lines (text) values ('one more')")
    conn.commit()
    calls = []
    real = privacy.public_text
    monkeypatch.setattr(exports, "public_text", lambda t, **k: calls.append(t) or real(t, **k))
    _publish(path, docs)
    assert len(calls) > 6000
    calls.clear()
    assert _dump(dst) == _from_scratch(path, tmp_path)
    assert ADDRESS.encode() not in dst.read_bytes()


def test_the_copy_is_updated_in_place_and_a_stopped_update_leaves_the_last_copy(store, tmp_path, monkeypatch):
    """After one new row the copy is the same file brought up to date (no new copy of the store); an
    update stopped half-way rolls back to the last copy, and the next build makes the copy whole."""
    path, conn = store
    docs, dst = _published(path, tmp_path)
    before = _dump(dst)
    time.sleep(0.05)
    conn.executemany("insert into log_lines (text) values (?)", [(f"new line {i} from {ADDRESS}",) for i in range(50)])
    conn.commit()
    real = exports._public_row
    seen = []

    def failing(table, *a):
        seen.append(table)
        if len(seen) > 10:
            raise OSError("disk gone")
        return real(table, *a)

    monkeypatch.setattr(exports, "_public_row", failing)
    with pytest.raises(OSError):
        _publish(path, docs)
    assert _dump(dst) == before and not (dst.parent / (DATABASE_NAME + "-journal")).exists()
    monkeypatch.setattr(exports, "_public_row", real)
    assert _publish(path, docs) == [dst]
    assert _dump(dst) == _from_scratch(path, tmp_path)
    time.sleep(0.05)
    inode = dst.stat().st_ino
    conn.execute("insert into log_lines (text) values ('one more')")
    conn.commit()
    assert _publish(path, docs) == [dst] and dst.stat().st_ino == inode  # the same file, updated
    assert _dump(dst) == _from_scratch(path, tmp_path)
    assert ADDRESS.encode() not in dst.read_bytes()
    # a store that lost most of its rows: the copy is compacted, not left mostly free pages
    time.sleep(0.05)
    conn.execute("delete from log_lines where id > 100")
    conn.execute("delete from gate_results")
    conn.commit()
    assert _publish(path, docs) == [dst]
    assert _dump(dst) == _from_scratch(path, tmp_path)
    check = sqlite3.connect(dst)
    free, pages = (check.execute(f"pragma {p}").fetchone()[0] for p in ("freelist_count", "page_count"))
    check.close()
    assert free * 4 <= pages
    # a copy that is a quarter free pages is made whole from the store, not updated
    record: dict = {}
    spare = sqlite3.connect(dst)
    spare.execute("pragma secure_delete = on")
    spare.execute("create table filler (x)")
    spare.executemany("insert into filler values (?)", [("x" * 1000,)] * 2000)
    spare.commit()
    spare.execute("drop table filler")
    spare.commit()
    spare.close()
    conn.execute("insert into log_lines (text) values ('after the filler')")
    conn.commit()
    assert public_database(path, dst, masked=set(), record=record)
    assert record["incremental"] is False and _dump(dst) == _from_scratch(path, tmp_path)


def test_a_write_while_the_copy_is_made_is_copied_by_the_next_build(store, tmp_path, monkeypatch):
    """A capture that writes to the store while the copy is being made: the record names the store as it was
    when the copy began, so the next build sees the write and copies it (it was read as unchanged before)."""
    path, conn = store
    docs, dst = _published(path, tmp_path)
    real = exports.public_database

    def copy_then_capture(*a, **k):
        out = real(*a, **k)
        conn.execute("insert into log_lines (text) values ('written during the copy')")
        conn.commit()
        return out

    time.sleep(0.05)
    conn.execute("insert into log_lines (text) values ('before the copy')")
    conn.commit()
    monkeypatch.setattr(exports, "public_database", copy_then_capture)
    _publish(path, docs)
    monkeypatch.setattr(exports, "public_database", real)
    assert _publish(path, docs) == [dst]
    assert "written during the copy" in str(_dump(dst)["log_lines"])
    assert _dump(dst) == _from_scratch(path, tmp_path)


def test_an_update_that_fails_while_writing_leaves_the_last_copy_whole(store, tmp_path, monkeypatch):
    """The copy's rows are written in one transaction: a failure after the first table's rows are written
    leaves the last copy as it was, and the next build brings it up to date."""
    path, conn = store
    docs, dst = _published(path, tmp_path)
    before = _dump(dst)
    time.sleep(0.05)
    conn.execute("insert into log_lines (text) values ('new in the store')")
    conn.execute("update gate_results set observed = 'changed' where id = 3")
    conn.commit()
    real = exports.connect_readonly

    class FailingSecondWrite:
        def __init__(self, c):
            self.c, self.writes = c, 0

        def executemany(self, sql, rows):
            self.writes += 1
            if self.writes == 2:
                raise sqlite3.OperationalError("disk I/O error")
            return self.c.executemany(sql, rows)

        def __getattr__(self, name):
            return getattr(self.c, name)

    monkeypatch.setattr(exports, "connect_readonly", lambda p: FailingSecondWrite(real(p)))
    with pytest.raises(sqlite3.OperationalError):
        _publish(path, docs)
    assert _dump(dst) == before
    monkeypatch.setattr(exports, "connect_readonly", real)
    assert _publish(path, docs) == [dst]
    assert _dump(dst) == _from_scratch(path, tmp_path)


def test_with_the_stores_change_counts_only_new_rows_and_moved_buckets_are_compared(store, tmp_path, monkeypatch):
    """The store's triggers (daemon/store/migrations.py follow_rows) record changed, deleted and replaced rows
    per bucket of rowids: an update compares the rows above each table's last highest id and the buckets
    whose record moved, and still gives the copy a whole build gives. A store without them compares
    every row. A row replaced with ``insert or replace`` by a writer without recursive triggers is
    recorded too, and so is an edit made after restoring a backup that reaches the same count."""
    import sqlite_utils

    from cardproof.daemon.store.migrations import ROW_CHANGE_BITS, m022_row_changes, m025_row_salts

    path, conn = store
    asked: list = []
    real = exports._rows_to_mask
    monkeypatch.setattr(exports, "_rows_to_mask",
                        lambda c, t, cols, m, ranges=None: asked.append((t, ranges)) or real(c, t, cols, m, ranges))
    docs, copy = _published(path, tmp_path)
    conn.execute("insert into log_lines (text) values ('one more line')")
    conn.commit()
    _publish(path, docs)
    assert asked and all(r is None for _, r in asked)  # no change counts in this store: every row compared

    m022_row_changes(sqlite_utils.Database(conn))
    m025_row_salts(sqlite_utils.Database(conn))
    conn.commit()
    _publish(path, docs)  # the schema changed: made whole, with the counts it is up to
    top = conn.execute("select max(rowid) from log_lines").fetchone()[0]
    asked.clear()
    conn.executemany("insert into log_lines (text) values (?)", [(f"new line {i}",) for i in range(20)])
    conn.commit()
    _publish(path, docs)
    ranges = dict(asked)
    assert ranges["log_lines"] == [(top + 1, None)] and ranges["gate_results"][-1][1] is None
    assert _dump(copy) == _from_scratch(path, tmp_path)

    # an old line now holds an address: its bucket is compared, and masked
    asked.clear()
    conn.execute("update log_lines set text = ? where id = 10", [f"from {ADDRESS}"])
    conn.execute("delete from gate_results where id = 2500")
    conn.commit()
    _publish(path, docs)
    ranges = dict(asked)
    assert ranges["log_lines"][0] == (0, (1 << ROW_CHANGE_BITS) - 1) and len(ranges["log_lines"]) == 2
    assert (2500 >> ROW_CHANGE_BITS) << ROW_CHANGE_BITS == ranges["gate_results"][0][0]
    assert _dump(copy) == _from_scratch(path, tmp_path) and ADDRESS.encode() not in copy.read_bytes()

    # a row replaced whole by a writer without recursive triggers (the sqlite3 shell, a plain
    # connection; sqlite-utils turns them on): its insert names an existing id, which the record sees
    conn.execute("pragma recursive_triggers = off")
    conn.execute("insert or replace into log_lines (id, text) values (20, ?)", [f"key {SECRET}"])
    conn.commit()
    _publish(path, docs)
    assert _dump(copy) == _from_scratch(path, tmp_path) and SECRET.encode() not in copy.read_bytes()

    # a backup restored, then edited once: the bucket's count is what it was after another edit, its
    # salt is not
    backup = tmp_path / "backup.db"
    conn.execute("vacuum into ?", [str(backup)])
    conn.execute("update log_lines set text = 'first edit' where id = 30")
    conn.commit()
    _publish(path, docs)
    assert _dump(copy) == _from_scratch(path, tmp_path)
    restored = sqlite3.connect(backup)
    restored.backup(conn)
    restored.close()
    conn.execute("update log_lines set text = 'other edit' where id = 30")
    conn.commit()
    _publish(path, docs)
    assert _dump(copy) == _from_scratch(path, tmp_path)
    assert b"other edit" in copy.read_bytes()
    # the periodic full compare stays as a net under anything else
    monkeypatch.setattr(exports, "FULL_EVERY", 1)
    asked.clear()
    conn.execute("insert into log_lines (text) values ('and another')")
    conn.commit()
    _publish(path, docs)
    assert all(r is None for _, r in asked)
    assert _dump(copy) == _from_scratch(path, tmp_path) and SECRET.encode() not in copy.read_bytes()
