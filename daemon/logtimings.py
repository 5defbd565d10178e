"""The server's own per-request timing lines (``print_timing``), parsed.

They are a second, independent record of the counters: benchmarks and tests
use them to check that the stored numbers equal what the server measured.
Throughput in the store never comes from here (principle 1).
"""

from __future__ import annotations

import re

_TIMING = re.compile(
    r"task (?P<task>\d+) \|\s+(?P<kind>prompt eval|eval) time =\s+(?P<ms>[\d.]+) ms /\s+(?P<n>\d+) tokens"
    r" \(\s*[\d.]+ ms per token,\s+(?P<tps>[\d.]+) tokens per second\)"
)


def print_timings(text: str) -> list[dict]:
    """Per task, in log order: ``{"task", "prompt": (ms, n, tps), "eval": (ms, n, tps)}``."""
    tasks: dict[str, dict] = {}
    for m in _TIMING.finditer(text):
        entry = tasks.setdefault(m["task"], {"task": int(m["task"])})
        key = "prompt" if m["kind"] == "prompt eval" else "eval"
        entry[key] = (float(m["ms"]), int(m["n"]), float(m["tps"]))
    return [t for t in tasks.values() if "prompt" in t and "eval" in t]
