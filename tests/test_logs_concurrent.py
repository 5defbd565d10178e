"""Two ``cardproof logs import`` processes on one database at once.

Real processes, a real SQLite file, real log files (the recorded router log
of tests/fixtures/logs, repeated to make each import last seconds) and a
real journal file written by systemd-journal-remote. Every line must be
stored exactly once and every fact with it, whichever import gets there first.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path
from cardproof.daemon.store import open_store
from logs_helpers import JOURNAL_REMOTE, write_journal

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


def big_log(path: Path, source: Path, copies: int) -> Path:
    data = source.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    path.write_bytes(data * copies)
    return path


def imports_at_once(db: Path, files: list[Path]) -> list[subprocess.CompletedProcess]:
    """One ``cardproof logs import`` per file, started together."""
    exe = [sys.executable, "-m", "cardproof.cli", "logs", "import"]
    procs = [subprocess.Popen(exe + [str(f), "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for f in files]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def stored(db: Path, name: str) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute(
            "select raw from log_lines where source_id = (select id from log_sources where name = ?) order by id",
            [os.path.abspath(name)])]
    finally:
        conn.close()


def counts(db: Path) -> dict:
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"select count(*) from {t}").fetchone()[0]
                for t in ("log_lines", "facts", "loads", "log_sources")}
    finally:
        conn.close()


def one_at_a_time(tmp_path: Path, files: list[Path]) -> dict:
    """The same imports in one process, one after the other: what the concurrent ones must end with."""
    store = open_store(tmp_path / "sequential.db")
    for f in files:
        import_path(store, f)
    store.close()
    return counts(tmp_path / "sequential.db")


def test_two_imports_of_different_files_at_once_on_a_new_database(tmp_path):
    a = big_log(tmp_path / "a.log", FIXTURES / "router-interleaved.log", 150)
    b = big_log(tmp_path / "b.log", FIXTURES / "real" / "poseidon-rocm-then-cpu.log", 60)
    db = tmp_path / "shared.db"
    results = imports_at_once(db, [a, b])
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-500:] for r in results]
    for r in results:
        assert "UNIQUE" not in r.stderr and "locked" not in r.stderr
    for f in (a, b):
        assert stored(db, str(f)) == f.read_text().splitlines()  # every line, once, in order
    assert counts(db) == one_at_a_time(tmp_path, [a, b])  # facts and loads too


def test_two_imports_of_the_same_file_at_once_store_it_once(tmp_path):
    a = big_log(tmp_path / "a.log", FIXTURES / "router-interleaved.log", 150)
    db = tmp_path / "shared.db"
    open_store(db).close()
    results = imports_at_once(db, [a, a])
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-500:] for r in results]
    lines = a.read_text().splitlines()
    reported = [int(r.stdout.split(": ", 1)[1].split(" new lines")[0].replace(",", "")) for r in results]
    assert sum(reported) == len(lines)  # taking turns (chunk by chunk), each line counted by one of them
    assert stored(db, str(a)) == lines
    assert counts(db) == one_at_a_time(tmp_path, [a])


@pytest.mark.skipif(not Path(JOURNAL_REMOTE).exists(), reason="needs systemd-journal-remote")
def test_two_imports_of_the_same_journal_file_at_once_store_it_once(tmp_path):
    journal = tmp_path / "server.journal"
    text = (FIXTURES / "router-interleaved.log").read_text().splitlines()
    write_journal(journal, [(line, 4242, "llama-server.service") for line in text * 40])
    db = tmp_path / "shared.db"
    results = imports_at_once(db, [journal, journal])
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-500:] for r in results]
    conn = sqlite3.connect(db)
    n, distinct = conn.execute("select count(*), count(distinct cursor) from log_lines").fetchone()
    assert n == distinct == len(text) * 40
    assert counts(db) == one_at_a_time(tmp_path, [journal])


def test_an_import_waits_for_a_writer_that_holds_the_lock_longer_than_the_busy_timeout(tmp_path, monkeypatch):
    """The importer keeps asking for the lock (IMPORT_LOCK_WAIT_S), telling the user it waits."""
    from cardproof.daemon.logs import importer

    monkeypatch.setattr(importer, "IMPORT_LOCK_WAIT_S", 30.0)
    a = big_log(tmp_path / "a.log", FIXTURES / "router-interleaved.log", 2)
    db = tmp_path / "shared.db"
    store = open_store(db)
    store.db.conn.execute("pragma busy_timeout = 300")  # one try gives up long before the holder is done
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('begin immediate'); print('locked', flush=True); time.sleep(3); c.execute('commit')\n",
         str(db)], stdout=subprocess.PIPE, text=True)
    said = []
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        stats = import_path(store, a, progress=said.append)
        waited_s = time.monotonic() - t0
    finally:
        holder.wait(timeout=30)
        store.close()
    assert stats["lines"] == len(a.read_text().splitlines())
    assert waited_s >= 2.0
    assert any("waiting for another writer" in s for s in said)


def test_a_capture_gives_up_after_its_lock_wait_and_stores_nothing(tmp_path):
    """Captures beside a watchdog wait only so long; the next capture takes up where the store says."""
    from cardproof.daemon.logs import capture_file
    from cardproof.daemon.store import StoreError

    a = big_log(tmp_path / "a.log", FIXTURES / "router-interleaved.log", 1)
    db = tmp_path / "shared.db"
    store = open_store(db)
    store.db.conn.execute("pragma busy_timeout = 200")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('begin immediate'); print('locked', flush=True); time.sleep(4); c.execute('commit')\n",
         str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        with pytest.raises(StoreError, match="locked"):
            capture_file(store, a, lock_wait_s=1.0)
        gave_up_s = time.monotonic() - t0
    finally:
        holder.wait(timeout=30)
    assert 0.9 <= gave_up_s < 3.5
    assert counts(db)["log_lines"] == 0 and counts(db)["log_sources"] == 0
    assert capture_file(store, a, final=True)["lines"] == len(a.read_text().splitlines())
    store.close()


def rows(db: Path) -> dict:
    conn = sqlite3.connect(db)
    try:
        return {
            "lines": conn.execute("select id, raw, load_id, attribution, offset from log_lines order by id").fetchall(),
            "facts": conn.execute("select line_id, load_id, name, device, value_num, value_text from facts "
                                  "order by id").fetchall(),
            "loads": conn.execute("select id, model_name, pid, port, start_line_id, ready_line_id, end_line_id, "
                                  "status from loads order by id").fetchall(),
        }
    finally:
        conn.close()


@pytest.mark.parametrize("source", ["router-interleaved.log", "real/ollama-0.24-cpu.log"])
def test_a_capture_in_chunks_stores_what_one_transaction_stores(tmp_path, monkeypatch, source):
    """Cut after every batch the reader takes (256 KiB here, 4 MiB in use), wherever that falls in a
    load: attribution carries over exactly."""
    from cardproof.daemon.logs import capture_file, importer, sources

    monkeypatch.setattr(sources, "_CHUNK_BYTES", 256 << 10)
    monkeypatch.setattr(importer, "_BETWEEN_CHUNKS_S", 0)  # the pause lets other writers in: none here
    copies = (13 << 18) // (FIXTURES / source).stat().st_size + 1  # over twelve batches
    log = big_log(tmp_path / "a.log", FIXTURES / source, copies)
    results = {}
    for label, chunk in (("whole", 10**9), ("chunked", 1)):
        monkeypatch.setattr(importer, "CAPTURE_CHUNK_LINES", chunk)
        store = open_store(tmp_path / f"{label}.db")
        stats = capture_file(store, log, final=True)
        store.close()
        results[label] = (stats, rows(tmp_path / f"{label}.db"))
    (whole, whole_rows), (chunked, chunked_rows) = results["whole"], results["chunked"]
    assert chunked["lines"] == whole["lines"] == len(log.read_text().splitlines())
    assert os.path.getsize(log) > 12 * sources._CHUNK_BYTES  # several batches, so several chunks
    assert chunked_rows == whole_rows
    for key in ("attributed", "unattributed", "facts", "loads"):
        assert chunked[key] == whole[key], key


CHUNKED_CHILD = """
import sys, time
from cardproof.daemon.logs import capture_file, importer
from cardproof.daemon.store import open_store
importer.CAPTURE_CHUNK_LINES = int(sys.argv[3])
store = open_store(sys.argv[1])
print("start", time.time(), flush=True)
capture_file(store, sys.argv[2], final=True)
print("end", time.time(), flush=True)
"""


def test_other_writers_get_in_between_the_chunks_of_a_long_capture(tmp_path):
    """A run storing samples while the daemon captures a backlog waits one chunk, not the whole backlog."""
    log = big_log(tmp_path / "a.log", FIXTURES / "router-interleaved.log", 250)  # 20 MB: five batches
    db = tmp_path / "shared.db"
    open_store(db).close()
    child = subprocess.Popen([sys.executable, "-c", CHUNKED_CHILD, str(db), str(log), "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    conn = sqlite3.connect(db, timeout=60, isolation_level=None)
    first = child.stdout.readline().split()
    assert first[0] == "start", child.stderr.read()
    waits = []
    while child.poll() is None:
        t0 = time.time()
        conn.execute("insert into models (name) values ('sample')")
        waits.append((t0, time.time() - t0))
        time.sleep(0.05)
    rest = child.stdout.read().split()
    assert child.returncode == 0, child.stderr.read()
    start, end = float(first[1]), float(rest[1])
    during = [w for t, w in waits if start <= t <= end]
    assert end - start > 1.0 and len(during) >= 3
    assert max(during) < 0.6 * (end - start)  # one chunk at most, never the whole capture
    assert conn.execute("select count(*) from models").fetchone()[0] == len(waits)
    assert stored(db, str(log)) == log.read_text().splitlines()
