"""What the runner is doing, read from its echo lines, and where it may stop.

``run_campaign`` reports through its ``echo`` callback; the daemon gives it one
that (a) keeps a thread-safe Progress for the heartbeat, and (b) stops the run
after the current request when the daemon was asked to stop: raising
KeyboardInterrupt from echo is the one interruption the runner turns into
status ``interrupted`` with its coverage. It is raised only right after a
sample line, when that sample is already committed, so the request that was in
flight when SIGTERM came is finished and stored, never dropped.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass, field

_RUN = re.compile(r"^run (?P<run>\d+): campaign (?P<name>.*?) \((?P<sha>[0-9a-f]+)\), (?P<cells>\d+) cells, "
                  r"(?P<planned>\d+) samples planned")
_SAMPLE = re.compile(r"^\[(?P<done>\d+)/(?P<planned>\d+)\] (?P<model>\S+) (?P<cls>\S+) reasoning=(?P<r>on|off) "
                     r"rep (?P<rep>\d+)/(?P<reps>\d+): (?P<text>.*)$")
_DECODE = re.compile(r"^decode (?P<tps>[\d.]+) tok/s")
_LOAD = re.compile(r"^load (?P<model>\S+): (?P<text>.*)$")


@dataclass
class Snapshot:
    """One consistent copy of the progress, for the heartbeat row and STATUS=."""

    phase: str = "idle"  # idle | waiting_quiet | running | stopping
    queue_id: int | None = None
    run_id: int | None = None
    campaign: str | None = None
    done: int = 0
    planned: int = 0
    measured: int = 0
    failed: int = 0
    model: str | None = None
    prompt_class: str | None = None
    reasoning: bool | None = None
    repetition: int | None = None
    repetitions: int | None = None
    last_decode_tps: float | None = None
    last_line: str | None = None
    note: str | None = None
    updated: float = field(default_factory=time.monotonic)

    @property
    def coverage(self) -> float | None:
        return self.measured / self.planned if self.planned else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("updated")
        d["coverage"] = self.coverage
        return d

    def status_line(self) -> str:
        """The one line for systemd's STATUS= and ``cardproof status``."""
        if self.phase == "running" and self.run_id is not None:
            cell = ""
            if self.model:
                cell = (f" {self.model} {self.prompt_class} reasoning={'on' if self.reasoning else 'off'}"
                        f" rep {self.repetition}/{self.repetitions}")
            tps = f", last {self.last_decode_tps:.1f} tok/s" if self.last_decode_tps is not None else ""
            cov = f", coverage {self.coverage:.0%}" if self.coverage is not None else ""
            load = f", {self.note}" if self.note and self.note.startswith("load ") else ""
            return f"run {self.run_id} ({self.campaign}): [{self.done}/{self.planned}]{cell}{cov}{tps}{load}"
        if self.phase == "running":
            return f"queue entry {self.queue_id}: starting {self.campaign}"
        if self.phase == "waiting_quiet":
            return f"queue entry {self.queue_id}: {self.note or 'waiting for quiet cards'}"
        if self.phase == "stopping":
            return "stopping: finishing the current request" + (f" of run {self.run_id}" if self.run_id else "")
        return "idle" + (f": {self.note}" if self.note else "")


class StopRun(KeyboardInterrupt):
    """Raised from echo after a stored sample; the runner records 'interrupted'."""


class Progress:
    """Thread-safe progress, updated by the worker, read by the main loop."""

    def __init__(self, on_change=None):
        self._lock = threading.Lock()
        self._snap = Snapshot()
        self._on_change = on_change
        self.stop_requested = threading.Event()
        self._stop_raised = False

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(**asdict(self._snap))

    def set(self, **values) -> None:
        with self._lock:
            for k, v in values.items():
                setattr(self._snap, k, v)
            self._snap.updated = time.monotonic()
        if self._on_change:
            self._on_change()

    def begin(self, queue_id: int, campaign: str, phase: str = "running") -> None:
        """A fresh snapshot for a new queue entry."""
        with self._lock:
            self._snap = Snapshot(phase=phase, queue_id=queue_id, campaign=campaign)
            self._stop_raised = False
        if self._on_change:
            self._on_change()

    def idle(self, note: str | None = None) -> None:
        with self._lock:
            self._snap = Snapshot(phase="idle", note=note)
        if self._on_change:
            self._on_change()

    def echo(self, line: str) -> None:
        """The runner's echo: parse the line, then stop here if asked to."""
        sample = _SAMPLE.match(line)
        with self._lock:
            s = self._snap
            s.last_line = line[:300]
            s.updated = time.monotonic()
            m = _RUN.match(line)
            if m:
                s.run_id, s.planned = int(m["run"]), int(m["planned"])
            elif sample:
                s.done, s.planned = int(sample["done"]), int(sample["planned"])
                s.note = None
                s.model, s.prompt_class = sample["model"], sample["cls"]
                s.reasoning = sample["r"] == "on"
                s.repetition, s.repetitions = int(sample["rep"]), int(sample["reps"])
                d = _DECODE.match(sample["text"])
                if d:
                    s.measured += 1
                    s.last_decode_tps = float(d["tps"])
                else:
                    s.failed += 1
            elif _LOAD.match(line):
                s.note = line[:200]  # the cell fields keep describing the last sample
            must_stop = (
                sample is not None
                and self.stop_requested.is_set()
                and not self._stop_raised
                and s.done < s.planned  # after the last sample the run completes on its own
            )
            if must_stop:
                self._stop_raised = True
                s.phase = "stopping"
        if self._on_change:
            self._on_change()
        if must_stop:
            raise StopRun("SIGTERM: stopped after the current request")
