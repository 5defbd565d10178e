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
