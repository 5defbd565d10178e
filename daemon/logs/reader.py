"""What every log reader shares: its error, its counters, its position."""

from __future__ import annotations

import time
from collections import Counter

from ..said import Saying


class LogSourceError(Exception):
    """The source cannot be read at all; the message names it and why."""


class Reader:
    """Yields batches of records ``(ts, unit, pid, cursor, offset, raw, raw_bytes)`` from ``batches()``."""

    kind = "?"

    def __init__(self, name: str):
        self.name = name
        self.gaps: list[tuple[Saying, int | None]] = []  # why, lines skipped (daemon/said.py)
        self.warnings: Counter = Counter()
        self.read_seconds = 0.0  # wall time spent waiting for and decoding input
        self.read_cpu_seconds = 0.0  # this process's CPU time for the same
        self.split_cpu_seconds = 0.0  # CPU time of a process that splits the input beside this one
        self.position: dict = {}
        self.dedupe = False  # set when a re-read may repeat stored lines
        self.resumable = False  # True while ``position`` after the last batch is a place to resume from

    def _clock(self, t0: float, c0: float) -> None:
        self.read_seconds += time.perf_counter() - t0
        self.read_cpu_seconds += time.process_time() - c0
