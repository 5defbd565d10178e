"""Copying one run's rows between two cardproof databases, ids renumbered.

Every id column that points at another row (``run_id``, ``sample_id``,
``line_id``, ...) is rewritten through the map of the rows copied so far;
a pointer to a row that was not copied becomes NULL and is counted, never
left pointing at an unrelated row of the target.
"""

from __future__ import annotations

import json
import sqlite3

#: column -> table whose ids it holds
POINTERS = {
    "run_id": "runs", "campaign_id": "campaigns", "model_id": "models", "cell_id": "cells",
    "sample_id": "samples", "load_id": "loads", "line_id": "log_lines", "source_id": "log_sources",
    "start_line_id": "log_lines", "ready_line_id": "log_lines", "end_line_id": "log_lines",
    "merged_into": "loads", "import_id": "llama_bench_imports",
    "base_model_id": "models",  # a variant's base (migrations.py m024)
}
#: JSON columns holding lists of ids
ID_LISTS = {"line_ids_json": "log_lines"}


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"pragma table_info([{table}])")]


def tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' order by name")]


class Copier:
    """Copies rows from ``src`` into ``dst`` and remembers ``old id -> new id`` per table."""

    def __init__(self, src: sqlite3.Connection, dst: sqlite3.Connection):
        self.src = src
        self.dst = dst
        self.maps: dict[str, dict[int, int]] = {}
        self.dropped_pointers: dict[str, int] = {}
        self.dropped_columns: dict[str, list[str]] = {}
        self._next: dict[str, int] = {}
        self._pending: list[tuple] = []
        self.pointers = dict(POINTERS)

    def shared_columns(self, table: str) -> list[str]:
        theirs, ours = columns(self.src, table), set(columns(self.dst, table))
        lost = [c for c in theirs if c not in ours]
        if lost:
            self.dropped_columns[table] = lost
        return [c for c in theirs if c in ours]

    def _new_id(self, table: str) -> int:
        if table not in self._next:
            self._next[table] = (self.dst.execute(f"select max(id) from [{table}]").fetchone()[0] or 0) + 1
        nid = self._next[table]
        self._next[table] += 1
        return nid

    def remap(self, table: str, col: str, value):
        """``value`` of pointer column ``col`` in the target's numbering (None if not copied)."""
        if value is None:
            return None
        target = self.pointers.get(col)
        if target is None:
            return value
        new = self.maps.get(target, {}).get(value)
        if new is None:
            key = f"{table}.{col}"
            self.dropped_pointers[key] = self.dropped_pointers.get(key, 0) + 1
        return new

    def remap_list(self, table: str, col: str, raw):
        if raw is None:
            return None
        try:
            ids = json.loads(raw)
        except ValueError:
            return raw
        target = self.maps.get(ID_LISTS[col], {})
        return json.dumps([target[i] for i in ids if i in target])

    def copy(self, table: str, where: str, params: list, *, set_values: dict | None = None,
             defer: tuple[str, ...] = ()) -> int:
        """Copy the rows of ``table`` matching ``where``; ``defer`` pointer columns are fixed later."""
        cols = self.shared_columns(table)
        if "id" not in cols:
            return 0
        rows = self.src.execute(
            f"select {', '.join(f'[{c}]' for c in cols)} from [{table}] where {where} order by id", params
        ).fetchall()
        if not rows:
            return 0
        mapping = self.maps.setdefault(table, {})
        # values the merge sets itself (merged_from, ...) may be columns the source never had
        extra = [k for k in (set_values or {}) if k not in cols and k in columns(self.dst, table)]
        out = []
        pending = []
        for row in rows:
            rec = dict(zip(cols, row))
            if rec["id"] in mapping:
                continue
            old = rec["id"]
            rec["id"] = self._new_id(table)
            mapping[old] = rec["id"]
            for c in cols:
                if c in defer:
                    pending.append((rec["id"], c, rec[c]))
                    rec[c] = None
                elif c != "id" and c in self.pointers:
                    rec[c] = self.remap(table, c, rec[c])
                elif c in ID_LISTS:
                    pending.append((rec["id"], c, rec[c]))
            if set_values:
                rec.update({k: v for k, v in set_values.items() if k in rec or k in extra})
            out.append([rec.get(c) for c in cols + extra])
        if out:
            names = ", ".join(f"[{c}]" for c in cols + extra)
            marks = ", ".join("?" * len(cols + extra))
            self.dst.executemany(f"insert into [{table}] ({names}) values ({marks})", out)
        self._pending += [(table, *p) for p in pending]
        return len(out)

    def fix_deferred(self) -> None:
        """Fill the pointers that referred to rows copied after their own row (loads -> samples, lines)."""
        for table, new_id, col, value in self._pending:
            fixed = self.remap_list(table, col, value) if col in ID_LISTS else self.remap(table, col, value)
            self.dst.execute(f"update [{table}] set [{col}] = ? where id = ?", [fixed, new_id])
        self._pending = []

    def ids(self, table: str) -> list[int]:
        """Old ids of ``table`` copied so far (for the next table's ``where``)."""
        return list(self.maps.get(table, {}))


def in_list(col: str, ids: list[int]) -> tuple[str, list]:
    """A ``where`` over a possibly long id list (SQLite limits bound parameters, so ids go in as JSON)."""
    return f"[{col}] in (select value from json_each(?))", [json.dumps(ids)]
