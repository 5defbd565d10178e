"""Every write is committed and seen by other processes at once, also while the same
process opens the store a second time (the daemon's main loop and its worker thread,
a run and its capture): a crash never loses a taken sample.

Closing any descriptor of a file drops every POSIX lock the process holds on it,
SQLite's included. A second open that read the file's header with a descriptor of
its own left the first connection without its lock; the next reader in another
process to close its connection took itself for the file's last user and deleted
-wal and -shm, and every later commit went into the deleted -wal.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cardproof.daemon.store import StoreError, open_store, utcnow

READER = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=5); " \
         "print(c.execute('select count(*) from daemon_queue').fetchone()[0]); c.close()"


def seen_by_another_process(db: Path) -> int:
    """Rows of daemon_queue a plain sqlite3 connection of another process sees (opened, read, closed)."""
    out = subprocess.run([sys.executable, "-c", READER, str(db)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def queue_row(n: int) -> dict:
    return {"campaign_name": f"c{n}", "campaign_sha256": f"{n:064x}", "campaign_text": "", "enqueued_at": utcnow(),
            "status": "queued", "attempts": 0}


@pytest.mark.parametrize("second", ["rw", "ro"])
def test_a_second_open_in_the_same_process_keeps_every_commit_visible(tmp_path, second):
    db = tmp_path / "d.db"
    open_store(db).close()  # a file with no -wal beside it: the next open reads its header
    main = open_store(db)
    main.insert("daemon_queue", queue_row(0))
    assert seen_by_another_process(db) == 1
    worker = open_store(db, mode=second)  # as the daemon's worker thread does while the main loop holds its store
    try:
        for n in range(1, 4):
            # another process reads and closes: it must not take the file for its own
            assert seen_by_another_process(db) == n
            assert Path(f"{db}-wal").exists()
            main.insert("daemon_queue", queue_row(n))
            assert seen_by_another_process(db) == n + 1  # committed and visible at once
            if second == "rw":
                worker.insert("daemon_queue", queue_row(100 + n))
                main.update("daemon_queue", 1, {"attempts": n})
                assert seen_by_another_process(db) == n + 2
                main.db.execute("delete from daemon_queue where campaign_name = ?", [f"c{100 + n}"])
                main.db.conn.commit()
    finally:
        worker.close()
        main.close()
    assert seen_by_another_process(db) == 4


def test_a_crash_after_a_second_open_loses_no_commit(tmp_path):
    """A process that opens the store twice, writes and is killed: every row it committed is in the file."""
    db = tmp_path / "d.db"
    open_store(db).close()
    script = (
        "import os, subprocess, sys\n"
        "from cardproof.daemon.store import open_store, utcnow\n"
        "db = sys.argv[1]\n"
        "main = open_store(db)\n"
        "main.insert('daemon_queue', {'campaign_name': 'first', 'campaign_sha256': 'a', 'campaign_text': '',"
        " 'enqueued_at': utcnow(), 'status': 'queued', 'attempts': 0})\n"
        "worker = open_store(db)\n"
        "subprocess.run([sys.executable, '-c', sys.argv[2], db], check=True, capture_output=True)\n"
        "for n in range(5):\n"
        "    worker.insert('daemon_queue', {'campaign_name': f's{n}', 'campaign_sha256': 'b', 'campaign_text': '',"
        " 'enqueued_at': utcnow(), 'status': 'queued', 'attempts': 0})\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(db), READER], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert seen_by_another_process(db) == 6


def test_no_store_write_leaves_the_connection_in_a_transaction(tmp_path):
    """Store.insert / update / upsert_model / write_lock commit their own work, also when they fail."""
    store = open_store(tmp_path / "d.db")
    conn = store.db.conn
    try:
        qid = store.insert("daemon_queue", queue_row(1))
        assert not conn.in_transaction
        store.update("daemon_queue", qid, {"attempts": 2})
        assert not conn.in_transaction
        mid = store.upsert_model({"name": "m", "digest": "d"})
        assert not conn.in_transaction
        assert store.upsert_model({"name": "m", "digest": "d"}) == mid  # the found branch returns inside the lock
        assert not conn.in_transaction
        with store.write_lock() as c:
            c.execute("update daemon_queue set attempts = 3 where id = ?", [qid])
        assert not conn.in_transaction
        with pytest.raises(StoreError):
            store.insert("daemon_queue", {**queue_row(2), "id": qid})  # UNIQUE
        assert not conn.in_transaction
        with pytest.raises(Exception):
            store.update("daemon_queue", qid + 99, {"attempts": 5})  # no such row
        assert not conn.in_transaction
        with pytest.raises(RuntimeError), store.write_lock() as c:
            c.execute("update daemon_queue set attempts = 4 where id = ?", [qid])
            raise RuntimeError("rolled back")
        assert not conn.in_transaction
        other = sqlite3.connect(store.path, timeout=5)
        try:
            assert other.execute("select attempts from daemon_queue where id = ?", [qid]).fetchone()[0] == 3
            assert other.execute("select count(*) from models").fetchone()[0] == 1
        finally:
            other.close()
    finally:
        store.close()
