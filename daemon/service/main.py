"""The daemon's main loop: lock, recover, collectors, queue, signals, sd_notify.

The main thread owns signals, the heartbeat and the collectors; a campaign
runs in a worker thread (worker.py). SIGTERM or SIGINT ask the worker to stop
after the current request, wait for it at most ``stop_timeout_s``, stop the
collectors, write the final state and return 0.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from cardproof.daemon.store.liveness import reconcile_runs
from cardproof.daemon.run.runner import EXIT_INTERRUPTED
from ..store import Store, StoreError, dumps, open_store, utcnow
from . import queue
from .collectors import CollectorContext, CollectorSet, build_collectors, host_and_pid
from .config import DaemonConfig
from .notify import Notifier
from .progress import Progress
from .worker import Worker

EXIT_STOP_TIMEOUT = 1


class DaemonError(Exception):
    """The daemon cannot start; the message names the file or the other daemon."""


def _stderr(line: str) -> None:
    print(f"cardproof daemon: {line}", file=sys.stderr, flush=True)


class DaemonLock:
    """An exclusive flock next to the database: one daemon per database.

    The kernel drops the lock when the process dies, SIGKILL included, so a
    stale lock file never blocks a restart.
    """

    def __init__(self, db: Path):
        self.path = Path(str(db) + ".daemon-lock")
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DaemonError(f"{self.path}: another cardproof daemon (pid {holder}) uses this database") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Daemon:
    """One daemon process; ``run()`` returns the exit code."""

    def __init__(self, config: DaemonConfig, *, notifier: Notifier | None = None,
                 log: Callable[[str], None] = _stderr, collectors: list | None = None):
        self.config = config
        self.notifier = notifier or Notifier()
        self.log = log
        self._collectors = collectors
        self._wake = threading.Event()
        self._stop_signal: int | None = None
        self._force = False
        self.progress = Progress(on_change=self._wake.set)
        self.worker: Worker | None = None
        self.daemon_id: int | None = None

    # -- signals ---------------------------------------------------------
    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """What SIGTERM does; callable from tests that run the loop in a thread.

        A second signal (Ctrl-C twice) stops waiting for the request in flight.
        """
        if self._stop_signal is not None:
            self._force = True
        self._stop_signal = signum
        self.progress.stop_requested.set()
        self._wake.set()

    def _install_signals(self) -> dict:
        old = {}
        if threading.current_thread() is not threading.main_thread():
            return old
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, lambda signum, frame: self.request_stop(signum))
        return old

    # -- the loop --------------------------------------------------------
    def run(self) -> int:
        cfg = self.config
        lock = DaemonLock(cfg.db)
        lock.acquire()
        try:
            store = open_store(cfg.db)
        except StoreError:
            lock.release()
            raise
        old_handlers = self._install_signals()
        try:
            return self._run(store)
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            store.close()
            lock.release()
            self.notifier.close()

    def _run(self, store: Store) -> int:
        cfg = self.config
        last = store.db.execute("select max(heartbeat_at) from daemon_state").fetchone()[0]
        self.daemon_id = store.insert("daemon_state", {
            **host_and_pid(), "config_path": cfg.path, "started_at": utcnow(), "state": "starting",
            "heartbeat_s": cfg.heartbeat_s,
        })
        recovered = queue.recover(store, daemon_id=self.daemon_id, max_attempts=cfg.max_attempts,
                                  last_heartbeat=last)
        # foreground runs recover() leaves alone: interrupted where their process is provably gone
        try:
            gone = reconcile_runs(store, by=f"daemon {self.daemon_id} start")
        except Exception as exc:  # noqa: BLE001 -- the daemon starts anyway; the next start tries again
            gone = []
            self.log(f"runs whose process is gone not marked interrupted: {type(exc).__name__}: {exc}")
        ended = {g["run_id"] for g in gone}
        recovered = [r for r in recovered if not (r.get("action") == "left running" and r.get("run_id") in ended)]
        recovered += gone
        store.update("daemon_state", self.daemon_id, {"recovered_json": dumps(recovered)})
        for item in recovered:
            self.log("recovered: " + ", ".join(f"{k} {v}" for k, v in item.items()))
        collectors = CollectorSet(self._collectors if self._collectors is not None else build_collectors(cfg))
        ctx = CollectorContext(store, cfg.db, cfg, self.daemon_id, self.progress, collectors.statuses)
        collectors.start(ctx)
        for name, st in collectors.statuses().items():
            self.log(f"collector {name}: {st.get('state')}" + (f" ({st['reason']})" if st.get("reason") else ""))
        self.progress.idle()
        collectors.heartbeat.write(force=True, state="idle", extra={"ready_at": utcnow()})
        # READY=1 only now: recovery is done and the collectors are running
        self.notifier.ready(f"idle, db {cfg.db}")
        self.log(f"ready: pid {os.getpid()}, db {cfg.db}, config {cfg.path or '(defaults)'}")
        code = self._loop(store, collectors)
        collectors.stop()
        reason = f"signal {signal.Signals(self._stop_signal).name}" if self._stop_signal else "stopped"
        self.progress.set(phase="idle", note=None)
        collectors.heartbeat.write(force=True, state="stopped",
                                   extra={"stopped_at": utcnow(), "exit_reason": f"{reason}, exit code {code}"})
        self.log(f"stopped ({reason}), exit code {code}")
        return code

    def _loop(self, store: Store, collectors: CollectorSet) -> int:
        cfg = self.config
        hb = collectors.heartbeat
        next_poll = 0.0
        next_tick = 0.0
        while self._stop_signal is None:
            now = time.monotonic()
            if self.worker is not None and not self.worker.is_alive():
                self._finish_worker(store)
                next_poll = 0.0
            if self.worker is None and now >= next_poll:
                next_poll = now + cfg.queue_poll_s
                self._start_next(store)
            if now >= next_tick:
                next_tick = now + cfg.tick_s
                collectors.tick(now)
            else:
                hb.write(now=now)  # woken by progress: write it now, not at the next tick
            self._notify(hb, now)
            self._wake.wait(max(0.0, min(next_tick, next_poll if self.worker is None else next_tick) - time.monotonic()))
            self._wake.clear()
        return self._shutdown(store, collectors)

    def _notify(self, hb, now: float) -> None:
        # the watchdog vouches for a daemon that can still write its heartbeat, nothing less
        if hb.healthy(now):
            self.notifier.watchdog(now)
        self.notifier.status(self.progress.snapshot().status_line())

    def _start_next(self, store: Store) -> None:
        entry = queue.claim_next(store)
        if entry is None:
            return
        self.log(f"queue entry {entry.id}: starting {entry.campaign_name} (attempt {entry.attempts})")
        self.progress.begin(entry.id, entry.campaign_name)
        self.worker = Worker(self.config.db, entry, self.config, self.progress, self.daemon_id,
                             on_done=self._wake.set, log=self.log)
        self.worker.start()

    def _finish_worker(self, store: Store) -> None:
        w, self.worker = self.worker, None
        if w.result is not None:
            r = w.result
            self.log(f"queue entry {w.entry.id}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
        else:
            # the worker died before it could write a status: do it here
            queue.finish(store, w.entry.id, "failed", f"the daemon's worker failed: {w.error}")
            self.log(f"queue entry {w.entry.id}: failed ({w.error})")
        self.progress.idle()

    def _shutdown(self, store: Store, collectors: CollectorSet) -> int:
        cfg = self.config
        hb = collectors.heartbeat
        code = 0
        if self.worker is not None and self.worker.is_alive():
            self.progress.set(phase="stopping")
            self.notifier.stopping("stopping: finishing the current request")
            self.log(f"stop requested: waiting up to {cfg.stop_timeout_s:g} s for the current request")
            deadline = time.monotonic() + cfg.stop_timeout_s
            while self.worker.is_alive() and time.monotonic() < deadline and not self._force:
                self.worker.join(min(cfg.tick_s, max(0.0, deadline - time.monotonic())))
                now = time.monotonic()
                hb.write(now=now, state="stopping")
                if hb.healthy(now):
                    self.notifier.watchdog(now)
            if self.worker.is_alive():
                code = EXIT_STOP_TIMEOUT
                self._abandon(store)
            else:
                self._finish_worker(store)
        else:
            self.notifier.stopping("stopping")
        return code

    def _abandon(self, store: Store) -> None:
        """The worker did not stop in time: record the run as interrupted ourselves."""
        w = self.worker
        snap = self.progress.snapshot()
        why = ("daemon stopped by a second signal with a request still in flight" if self._force else
               f"daemon stopped after {self.config.stop_timeout_s:g} s with a request still in flight")
        if snap.run_id is not None:
            run = store.db["runs"].get(snap.run_id)
            if run["status"] == "running":
                measured = store.db.execute(
                    "select count(*) from samples where run_id = ? and error_kind is null "
                    "and coalesce(kind, 'measure') = 'measure'", [snap.run_id]).fetchone()[0]
                planned = run["samples_planned"] or 0
                store.update("runs", snap.run_id, {
                    "status": "interrupted", "exit_code": EXIT_INTERRUPTED, "ended_at": utcnow(),
                    "samples_measured": measured, "coverage": measured / planned if planned else 0.0,
                    "error_text": f"interrupted: {why}",
                })
        queue.requeue_or_fail(store, w.entry.id, w.entry.attempts, self.config.max_attempts, why)
        self.log(f"queue entry {w.entry.id}: {why}")
