"""Read and split a child process's output on a thread of its own, ahead of the import.

Two costs of a journal import can run beside the importing thread on a
machine with a second core:

* journalctl itself. Its pipe holds 64 KiB; read only by the importing
  thread, journalctl stops whenever that much is unread. Here a thread keeps
  the pipe (grown to 1 MiB) drained.
* splitting journalctl's output into records. That is Python work and holds
  Python's lock, so it cannot run beside the importer's own Python work --
  but the importer spends much of its time inside SQLite, which releases the
  lock while it inserts. The importer marks those stretches (``window``);
  during them this thread splits as far ahead as it may, and outside them it
  keeps only a couple of batches ready, so it does not compete for the lock.

What is read ahead waits in a bounded queue: a child far ahead of the import
stops again once the queue is full, instead of filling memory.

:class:`ChildAhead` goes further for a whole journal in export format: the
split runs in a process of its own (``split_child.py``), on another core,
and this process only unpickles its batches. That took a 200,000-line
import from 2.4 s to 2.0 s here (``bench/log_import.py``).
:class:`PipeAhead` still splits a read resumed at its cursor (a few lines;
a process's start-up would cost more) and ``-o json`` output.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import queue
import subprocess
import sys
import threading
import time

from .lines import Refusing

_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux; Python < 3.10 lacks the name
_PIPE_BYTES = 1 << 20  # the unprivileged maximum of /proc/sys/fs/pipe-max-size by default
_READY = 2  # batches kept ready while the importer runs Python code
_AHEAD = 16  # batches split ahead at most (about 16 MiB of input) while it waits on SQLite
_EOF = object()


def _grow_pipe(fd: int) -> None:
    """Let the child write further ahead between two reads; where the system refuses, 64 KiB still work."""
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:
        pass


class _Ahead:
    """A bounded queue filled by a daemon thread (``_pump``) and read by iterating; errors go to the reader."""

    def _start(self, name: str) -> None:
        self.queue: queue.Queue = queue.Queue(maxsize=_AHEAD)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.rest = b""
        self.cpu_seconds = 0.0
        self.thread = threading.Thread(target=self._pump, name=name, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        raise NotImplementedError

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        while True:
            items = self.queue.get()
            if items is _EOF:
                if self.error is not None and not self.stop.is_set():
                    raise self.error
                return
            yield items

    def _drain(self, deadline: float, on_late=None) -> None:
        """Take items off the queue until the thread ends (a put waiting for room would keep it alive)."""
        while self.thread.is_alive():
            try:
                self.queue.get(timeout=0.05)
            except queue.Empty:
                pass
            if time.monotonic() > deadline:
                if on_late is None:
                    return
                on_late()


class PipeAhead(_Ahead):
    """``parse(bytes) -> (items, rest)`` applied to ``stream`` on a daemon thread; iterate, then ``close()``.

    Iterating yields each non-empty ``items`` in order; after the last,
    ``rest`` holds the unparsed tail (an unfinished entry); a read error or
    an exception in ``parse`` is raised to the consumer. ``window`` is an Event the consumer sets
    while it waits outside Python (see the module docstring).
    """

    def __init__(self, stream, parse, window: threading.Event | None = None):
        self.fd = stream.fileno()
        _grow_pipe(self.fd)
        self.parse = parse
        self.window = window
        self._start("pipe-ahead")

    def _pace(self) -> None:
        """Outside the consumer's windows, wait while enough is ready: the lock is the consumer's then."""
        window = self.window
        while (window is not None and not window.is_set() and self.queue.qsize() >= _READY
               and not self.stop.is_set()):
            window.wait(0.05)

    def _pump(self) -> None:
        pending = b""
        fresh: list[bytes] = []  # read since the last parse
        fresh_bytes = 0
        c0 = time.thread_time()
        try:
            while not self.stop.is_set():
                self._pace()
                data = os.read(self.fd, _PIPE_BYTES)
                if data:
                    fresh.append(data)
                    fresh_bytes += len(data)
                    # an entry longer than a read is parsed again once as much again has come, not
                    # after every read: that would cost its length squared
                    if fresh_bytes < len(pending):
                        continue
                elif not fresh:
                    break
                items, pending = self.parse(pending + b"".join(fresh))
                fresh, fresh_bytes = [], 0
                if items and not self._put(items):
                    return
                if not data:
                    break
            self.rest = pending
        except BaseException as exc:  # a read error, or a bug in parse: the consumer raises it
            self.error = exc
        finally:
            self.cpu_seconds = time.thread_time() - c0  # this thread's own CPU: reading and splitting
            self._put(_EOF)

    def close(self) -> None:
        """Stop reading (the caller has killed or reaped the child) and let the thread end."""
        self.stop.set()
        if self.window is not None:
            self.window.set()  # wake a paced thread
        self._drain(time.monotonic() + 10)  # a read of a child that is still alive and silent: leave it
        if self.window is not None and not self.thread.is_alive():
            self.window.clear()  # the reader's next run (a re-read after a lost cursor) starts paced again


_SPLIT_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "split_child.py")


class ChildAhead(_Ahead):
    """journalctl's export output read and split by a process of its own (``split_child.py``).

    Iterating yields each batch of records in order. After the last,
    ``rest`` is journalctl's unfinished tail, ``warnings`` the split's
    counts, ``returncode`` and ``stderr`` journalctl's; ``cpu_seconds`` is
    this process's reading thread (unpickling), ``child_cpu_seconds`` the
    splitting process's. A splitting process that dies without its closing
    frame raises :class:`ChildAheadError`. ``close()`` stops both processes
    if they are still running.
    """

    def __init__(self, command: list[str]):
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", _SPLIT_CHILD, *command],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _grow_pipe(self.proc.stdout.fileno())
        self.warnings: dict = {}
        self.returncode: int | None = None
        self.stderr = ""
        self.child_cpu_seconds = 0.0
        self._start("child-ahead")

    def _pump(self) -> None:
        c0 = time.thread_time()
        load = pickle.Unpickler(self.proc.stdout).load
        try:
            while not self.stop.is_set():
                try:
                    frame = load()
                except EOFError:
                    err = self.proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
                    raise ChildAheadError("the journal's reading process ended without its last frame"
                                          + (f": {err[-1][:300]}" if err else "")) from None
                if frame[0] == "b" or frame[0] == "r":
                    if not self._put(frame[1] if frame[0] == "b" else Refusing(frame[1])):
                        return
                else:
                    _, self.rest, self.warnings, self.returncode, self.stderr, self.child_cpu_seconds = frame
                    break
        except BaseException as exc:  # a dead child, an unreadable frame: the consumer raises it
            self.error = exc
        finally:
            self.cpu_seconds = time.thread_time() - c0
            self._put(_EOF)

    def close(self) -> None:
        """Stop reading; a child still running is ended (and it ends journalctl)."""
        self.stop.set()
        if self.proc.poll() is None:
            self.proc.terminate()
        self._drain(time.monotonic() + 10, on_late=self.proc.kill)  # a child that ignored its SIGTERM
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


class ChildAheadError(Exception):
    """The splitting process died or wrote something that is not its frames."""
