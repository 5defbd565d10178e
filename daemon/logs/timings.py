"""The server's own per-request timing lines (``print_timing``), parsed.

They are a second, independent record of the counters: benchmarks and tests
use them to check that the stored numbers equal what the server measured.
Throughput in the store never comes from here (principle 1).
"""

from __future__ import annotations

import re

_TIMING = re.compile(
    r"^(?:\[(?P<port>\d+)\] )?.*?task (?P<task>\d+) \|\s+(?P<kind>prompt eval|eval) time =\s+(?P<ms>[\d.]+) ms /\s+(?P<n>\d+) tokens"
    r" \(\s*[\d.]+ ms per token,\s+(?P<tps>[\d.]+) tokens per second\)",
    re.M,
)


def print_timings(text: str) -> list[dict]:
    """Per request, in log order: ``{"task", "port", "prompt": (ms, n, tps), "eval": (ms, n, tps)}``.

    Task numbers restart in every router child and after every reload, so a
    request is identified by the child's ``[port]`` prefix and a new entry
    starts whenever a task's prompt line comes again.
    """
    tasks: dict[tuple, dict] = {}
    order: list[dict] = []
    for m in _TIMING.finditer(text):
        key = (m["port"], m["task"])
        if m["kind"] == "prompt eval" or key not in tasks:
            tasks[key] = {"task": int(m["task"]), "port": int(m["port"]) if m["port"] else None}
            order.append(tasks[key])
        entry = tasks[key]
        part = "prompt" if m["kind"] == "prompt eval" else "eval"
        entry[part] = (float(m["ms"]), int(m["n"]), float(m["tps"]))
    return [t for t in order if "prompt" in t and "eval" in t]
