"""The read-ahead thread between journalctl and the importer (daemon/logs/pipe.py), with real child processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from cardproof.daemon.logs.pipe import PipeAhead


def _lines(data: bytes):
    *done, rest = data.split(b"\n")
    return done, rest


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def test_every_item_in_order_and_the_unfinished_rest():
    proc = _child("import sys\nfor i in range(200000): sys.stdout.write(f'line {i}\\n')\nsys.stdout.write('half')")
    ahead = PipeAhead(proc.stdout, _lines)
    got = [x for batch in ahead for x in batch]
    ahead.close()
    proc.wait()
    assert got == [f"line {i}".encode() for i in range(200000)]
    assert ahead.rest == b"half"
    assert not ahead.thread.is_alive()


def test_a_parse_error_reaches_the_consumer():
    proc = _child("print('ok'); print('bad'); print('never')")

    def parse(data):
        if b"bad" in data:
            raise ValueError("cannot split this")
        return _lines(data)

    ahead = PipeAhead(proc.stdout, parse)
    with pytest.raises(ValueError, match="cannot split this"):
        for _ in ahead:
            pass
    ahead.close()
    proc.wait()


def test_stopping_early_ends_the_thread_while_the_child_still_writes():
    """A consumer that stops (a cursor gone, a chunk limit) kills the child; the thread must not hang."""
    proc = _child("import sys\nwhile True: sys.stdout.write('x' * 1000 + '\\n')")
    ahead = PipeAhead(proc.stdout, _lines)
    for _ in ahead:
        break  # the queue fills behind us: the thread blocks on a full queue
    time.sleep(0.3)
    proc.kill()
    t = time.perf_counter()
    ahead.close()
    proc.wait()
    assert not ahead.thread.is_alive()
    assert time.perf_counter() - t < 5


def test_outside_the_window_only_a_few_batches_wait():
    """While the consumer runs Python code the reader keeps little ready; in a window it reads far ahead."""
    proc = _child("import sys\nfor i in range(3000000): sys.stdout.write(f'{i}\\n')")
    window = threading.Event()
    ahead = PipeAhead(proc.stdout, _lines, window)
    time.sleep(1.0)
    paced = ahead.queue.qsize()
    window.set()
    deadline = time.monotonic() + 10  # a busy machine may starve the child for a while
    while ahead.queue.qsize() <= paced and time.monotonic() < deadline:
        time.sleep(0.05)
    ahead_far = ahead.queue.qsize()
    proc.kill()
    ahead.close()
    proc.wait()
    assert paced <= 3
    assert ahead_far > paced


# -- the splitting process (pipe.ChildAhead, split_child.py) ------------------------------------------

def _fake_journalctl(tmp_path, body: str):
    """An executable standing in for journalctl: a shell script writing export entries."""
    exe = tmp_path / "journalctl"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return exe


def test_the_splitting_process_hands_over_every_entry_its_tail_warnings_and_exit(tmp_path):
    from cardproof.daemon.logs.pipe import ChildAhead

    exe = _fake_journalctl(tmp_path, "i=0\nwhile [ $i -lt 3000 ]; do\n"
                                     "  printf '__CURSOR=c%d\\n__REALTIME_TIMESTAMP=1764500000%06d\\n_PID=7\\n"
                                     "MESSAGE=line %d\\n\\n' $i $i $i\n  i=$((i+1))\ndone\n"
                                     "printf '__CURSOR=nomsg\\n_PID=7\\n\\n__CURSOR=half\\nMESSA'\n"
                                     "echo 'journal rotated meanwhile' >&2\nexit 3\n")
    ahead = ChildAhead([str(exe)])
    got = [rec for batch in ahead for rec in batch]
    ahead.close()
    assert [r[5] for r in got] == [f"line {i}" for i in range(3000)]
    assert got[12][:4] == ("2025-11-30T10:53:20.000012+00:00", None, 7, "c12")
    assert ahead.rest == b"__CURSOR=half\nMESSA"
    assert ahead.warnings == {"no_message": 1}
    assert ahead.returncode == 3 and "journal rotated meanwhile" in ahead.stderr
    assert ahead.child_cpu_seconds > 0


def test_a_splitting_process_that_dies_is_an_error_not_an_empty_journal(tmp_path):
    from cardproof.daemon.logs.pipe import ChildAhead, ChildAheadError

    ahead = ChildAhead([str(tmp_path / "no-such-journalctl")])  # the child's Popen fails: a traceback, no end
    with pytest.raises(ChildAheadError, match="ended without its last frame: .*No such file"):
        list(ahead)
    ahead.close()


def test_closing_early_ends_the_splitting_process_and_its_journalctl(tmp_path):
    import psutil

    from cardproof.daemon.logs.pipe import ChildAhead

    marker = tmp_path / "endless"
    exe = _fake_journalctl(tmp_path, f"# {marker}\nwhile :; do printf '__CURSOR=c\\nMESSAGE=m\\n\\n'; done\n")
    ahead = ChildAhead([str(exe)])
    first = next(iter(ahead))
    assert first and first[0][5] == "m"
    child = psutil.Process(ahead.proc.pid)
    shells = [p for p in child.children(recursive=True)]
    assert shells, "the fake journalctl is not running under the splitting process"
    ahead.close()
    assert ahead.proc.returncode is not None
    gone, alive = psutil.wait_procs(shells, timeout=10)
    assert not alive, f"journalctl left running: {[p.pid for p in alive]}"


def test_a_journalctl_that_fails_fails_the_import_and_stores_nothing(tmp_path, monkeypatch):
    import os

    from cardproof.daemon.logs import LogSourceError, capture_journal
    from cardproof.daemon.store import open_store

    _fake_journalctl(tmp_path, "printf '__CURSOR=c1\\nMESSAGE=main: model loaded\\n\\n'\n"
                               "echo 'Failed to iterate through journal: Bad message' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    store = open_store(tmp_path / "s.db")
    with pytest.raises(LogSourceError, match=r"journalctl failed \(exit 1\): Failed to iterate"):
        capture_journal(store, unit="llama-server.service")
    assert store.db.execute("select count(*) from log_lines").fetchone()[0] == 0


@pytest.mark.skipif(not __import__("os").path.exists("/lib/systemd/systemd-journal-remote"),
                    reason="needs systemd-journal-remote")
def test_a_whole_journal_is_split_by_a_process_and_a_read_resumed_at_its_cursor_on_a_thread(tmp_path, monkeypatch):
    """The daemon reads a unit's journal every few seconds from its cursor: a few lines, where a
    splitting process's start-up would cost more than it saves. The first read of a journal is split
    by the process, every later one on the thread -- and both store the same lines."""
    from cardproof.daemon.logs import import_path, pipe
    from cardproof.daemon.store import open_store
    from logs_helpers import write_journal

    made = {"child": 0, "thread": 0}
    for cls, key in ((pipe.ChildAhead, "child"), (pipe.PipeAhead, "thread")):
        init = cls.__init__

        def counted(self, *a, _init=init, _key=key, **k):
            made[_key] += 1
            _init(self, *a, **k)
        monkeypatch.setattr(cls, "__init__", counted)
    journal = tmp_path / "j.journal"
    entries = [(f"line {i}", 40, "llama-server.service") for i in range(50)]
    write_journal(journal, entries)
    store = open_store(tmp_path / "s.db")
    first = import_path(store, journal)
    assert (first["lines"], made) == (50, {"child": 1, "thread": 0})
    again = import_path(store, journal)
    assert (again["lines"], made) == (0, {"child": 1, "thread": 1})
    raws = [r[0] for r in store.db.execute("select raw from log_lines order by id")]
    assert raws == [f"line {i}" for i in range(50)]
