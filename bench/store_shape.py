"""The shape of the stored sample and gate rows: what is stored, with the values that vary run to run masked.

Two runs of the same campaign on the same server differ in their timings,
nonces and answers, never in which columns and JSON keys are filled, the
request that was sent or the gates that were evaluated. Comparing this
shape before and after a change of the runner's per-request path shows
that nothing stored was dropped or changed in kind (``runner_overhead.py
--dump``; ``tests/test_runner_overhead.py``).
"""

from __future__ import annotations

import json
import sqlite3

# the same in every run of a campaign: kept as they are
_EXACT = {
    "samples": {"repetition", "kind", "counter_source", "error_kind", "request_json"},
    "gate_results": {"gate", "threshold"},
}
_JSON = {"response_json", "observed_json"}


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "real", str: "text", bytes: "blob"}.get(type(value), type(value).__name__)


def json_shape(value):
    """Keys kept, leaves replaced by their JSON type (a list by the shapes of its items, deduplicated)."""
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes = []
        for item in value:
            s = json_shape(item)
            if s not in shapes:
                shapes.append(s)
        return shapes
    return _kind(value)


def _cell(table: str, column: str, value):
    if column in _EXACT.get(table, ()):
        return value
    if column in _JSON and isinstance(value, str):
        try:
            return {"json": json_shape(json.loads(value))}
        except ValueError:
            return "text (not JSON)"
    return _kind(value)


def store_shape(conn: sqlite3.Connection) -> dict:
    """Every distinct shape of a samples and a gate_results row, with how many rows have it."""
    out = {}
    for table, order in (("samples", "id"), ("gate_results", "sample_id, gate")):
        cur = conn.execute(f"select * from {table} order by {order}")  # noqa: S608 -- our own table names
        columns = [d[0] for d in cur.description]
        counts: dict[str, int] = {}
        for row in cur:
            key = json.dumps({c: _cell(table, c, v) for c, v in zip(columns, row)}, sort_keys=True)
            counts[key] = counts.get(key, 0) + 1
        out[table] = sorted(({"rows": n, "shape": json.loads(k)} for k, n in counts.items()),
                            key=lambda e: json.dumps(e, sort_keys=True))
    return out
