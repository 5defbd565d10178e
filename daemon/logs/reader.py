"""What every log reader shares: its error, its counters, its position."""

from __future__ import annotations

import time
from collections import Counter

from cardproof.daemon.store.said import Said, Saying
from .lines import MAX_LINE_BYTES


class LogSourceError(Exception):
    """The source cannot be read at all; the message names it and why."""


class Reader:
    """Yields batches of records ``(ts, unit, pid, cursor, offset, raw, raw_bytes)`` from ``batches()``."""

    kind = "?"

    def __init__(self, name: str):
        self.name = name
        self.gaps: list[tuple[Saying, int | None]] = []  # why, lines skipped (daemon/store/said.py)
        self.warnings: Counter = Counter()
        self.read_seconds = 0.0  # wall time spent waiting for and decoding input
        self.read_cpu_seconds = 0.0  # this process's CPU time for the same
        self.split_cpu_seconds = 0.0  # CPU time of a process that splits the input beside this one
        self.position: dict = {}
        self.dedupe = False  # set when a re-read may repeat stored lines
        self.resumable = False  # True while ``position`` after the last batch is a place to resume from
        # lines longer than MAX_LINE_BYTES, not stored: {"offset": byte} or {"cursor": ...}, and "bytes"
        self.refused: list[dict] = []

    def refuse(self, where: dict, length: int) -> None:
        """A line too long to store: counted, named in the import's summary and kept as a capture gap.

        ``where`` is ``{"offset": first byte}`` in a file or ``{"cursor": ...}``
        in a journal; ``length`` the line's bytes without its line ending.
        """
        self.warnings["too_long"] += 1
        self.refused.append({**where, "bytes": length})
        params = {"length_bytes": length, "limit_bytes": MAX_LINE_BYTES}
        if "cursor" in where:
            said = Said("journal entry {cursor} refused: its message is {length_bytes:,} bytes, longer than the "
                        "limit of {limit_bytes:,} bytes; not stored", {"cursor": str(where["cursor"]), **params})
        else:
            said = Said("line at byte {offset_bytes:,} refused: {length_bytes:,} bytes, longer than the limit of "
                        "{limit_bytes:,} bytes; not stored", {"offset_bytes": where["offset"], **params})
        self.gaps.append((said, 1))

    def _clock(self, t0: float, c0: float) -> None:
        self.read_seconds += time.perf_counter() - t0
        self.read_cpu_seconds += time.process_time() - c0
