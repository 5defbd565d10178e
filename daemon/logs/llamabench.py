"""Import llama-bench results (``-o json`` or ``-o jsonl``) with their whole configuration.

llama-bench measures inside one process: no HTTP, no chat template, no
sampling server. Its figures sit beside the server's counters in the
report, labelled as in-process measurements, never merged into them.

Each row keeps every configuration field llama-bench wrote (build commit,
backends, GPU layers, cache types, threads, batch sizes, test time) and the
raw ``samples_ts``/``samples_ns``; the full row is stored as JSON as well, so
fields of newer builds survive. Importing the same file twice is a no-op
(identified by its SHA-256).

A file is checked whole before anything is stored: a record nested deeper
than a result can be, a rate that is not a finite number, or a token count
that is not an integer refuses the file with its line, and nothing is
written. Optional configuration fields of an unexpected type are stored as
NULL (the raw row keeps them).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from cardproof.daemon.host import info as hostinfo
from cardproof.daemon.store import Store, StoreError, dumps, utcnow
from cardproof.daemon.store.file import shown

REQUIRED = ("n_prompt", "n_gen", "avg_ts", "samples_ts")
_INT = ("build_number", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "poll",
        "n_gpu_layers", "n_cpu_moe", "main_gpu", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns")
_BOOL = ("cpu_strict", "no_kv_offload", "use_mmap", "embeddings")
_TEXT = ("build_commit", "cpu_info", "gpu_info", "backends", "model_filename", "model_type", "cpu_mask",
         "type_k", "type_v", "split_mode", "flash_attn", "devices", "tensor_split", "tensor_buft_overrides",
         "test_time")


MAX_DEPTH = 8  # array > result > samples list is 3; anything much deeper is not llama-bench output
_INT64 = (-(1 << 63), (1 << 63) - 1)


class LlamaBenchError(Exception):
    """A file that cannot be imported; str() names the file and the line or record."""


@dataclass(frozen=True)
class BenchFile:
    """A llama-bench output file read and checked, not yet stored."""

    path: Path
    sha256: str
    format: str
    rows: list[dict]


def _too_deep(value, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (list, dict)):
            if depth > limit:
                return True
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _as_int(v) -> int | None:
    """An integer field as SQLite can hold it, or None (a wrong type, NaN, inf or beyond 64 bits)."""
    if not _is_number(v) or (isinstance(v, float) and not v.is_integer()):
        return None
    v = int(v)
    return v if _INT64[0] <= v <= _INT64[1] else None


def _row_problem(row: dict) -> str | None:
    """Why a result row cannot be stored as one, or None."""
    if _too_deep(row, MAX_DEPTH - 1):
        return f"nested more than {MAX_DEPTH} levels deep"
    for k in ("n_prompt", "n_gen"):
        v = _as_int(row[k])
        if v is None or v < 0:
            return f"{k} is not a non-negative integer: {row[k]!r}"[:200]
    if row.get("n_depth") is not None and (_as_int(row["n_depth"]) is None or row["n_depth"] < 0):
        return f"n_depth is not a non-negative integer: {row['n_depth']!r}"[:200]
    for k in ("avg_ts", "stddev_ts"):
        if (k == "avg_ts" or row.get(k) is not None) and not _is_number(row.get(k)):
            return f"{k} is not a finite number: {row.get(k)!r}"[:200]
    for k in ("samples_ts", "samples_ns"):
        v = row.get(k)
        if k == "samples_ns" and v is None:
            continue
        if not isinstance(v, list):
            return f"{k} is not a list"
        if not all(_is_number(x) for x in v):
            return f"{k} holds a value that is not a finite number"
    return None


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def parse(text: str, name: str = "<llama-bench>") -> tuple[str, list[dict]]:
    """``(format, rows)`` from llama-bench's json (an array) or jsonl (one object per line)."""
    stripped = text.lstrip()
    if not stripped:
        raise LlamaBenchError(f"{name}: empty file")
    rows: list[tuple[int, object]] = []
    if stripped.startswith("["):
        fmt = "json"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LlamaBenchError(f"{name}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
        except RecursionError:
            raise LlamaBenchError(f"{name}: JSON nested too deeply to be llama-bench output") from None
        if not isinstance(data, list):
            raise LlamaBenchError(f"{name}: expected a JSON array of results")
        # the line each record starts on, for messages
        starts, pos = [], 0
        for _ in data:
            pos = text.find("{", pos)
            starts.append(_line_of(text, pos) if pos >= 0 else 0)
            pos = _record_end(text, pos) if pos >= 0 else pos
        rows = list(zip(starts, data))
    else:
        fmt = "jsonl"
        # JSON Lines ends records at \n only: splitlines() would also cut at U+2028 inside a string
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise LlamaBenchError(f"{name}: line {n}: not valid JSON: {exc.msg}") from exc
            except RecursionError:
                raise LlamaBenchError(f"{name}: line {n}: JSON nested too deeply to be a llama-bench result") from None
    out = []
    for line_no, row in rows:
        if not isinstance(row, dict):
            raise LlamaBenchError(f"{name}: line {line_no}: expected a JSON object, got {type(row).__name__}")
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise LlamaBenchError(f"{name}: line {line_no}: not a llama-bench result (missing {', '.join(missing)})")
        problem = _row_problem(row)
        if problem:
            raise LlamaBenchError(f"{name}: line {line_no}: not a usable llama-bench result ({problem})")
        out.append(row)
    if not out:
        raise LlamaBenchError(f"{name}: no results")
    return fmt, out


def _record_end(text: str, start: int) -> int:
    """Index after the object that opens at ``start`` (braces inside strings ignored)."""
    depth, i, in_str = 0, start, False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def label_for(row: dict) -> str:
    """llama-bench's own label: ``pp512``, ``tg128``, ``pp512+tg128``, with ``@ d4096`` for a depth."""
    p, g, d = (_as_int(row.get(k)) or 0 for k in ("n_prompt", "n_gen", "n_depth"))
    name = "+".join(x for x in (f"pp{p}" if p else "", f"tg{g}" if g else "") if x) or "none"
    return f"{name} @ d{d}" if d else name


def to_row(row: dict, import_id: int, index: int) -> dict:
    out = {"import_id": import_id, "row_index": index, "test": label_for(row),
           "avg_ts": row.get("avg_ts"), "stddev_ts": row.get("stddev_ts"),
           "samples_ns_json": dumps(row.get("samples_ns")), "samples_ts_json": dumps(row.get("samples_ts")),
           "row_json": dumps(row)}
    for k in _INT:
        out[k] = _as_int(row.get(k))
    for k in _BOOL:
        v = row.get(k)
        out[k] = int(bool(v)) if v is not None else None
    for k in _TEXT:
        v = row.get(k)
        out[k] = None if v is None else str(v)
    return out


def read_file(path: Path | str) -> BenchFile:
    """Read and check a llama-bench output file; raise LlamaBenchError (one line) before any store is touched."""
    path = Path(path)
    name = shown(str(path))  # a file name may hold a newline; the message stays one line
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LlamaBenchError(f"{name}: cannot read file: {exc.strerror}") from exc
    except ValueError as exc:  # a NUL in the path
        raise LlamaBenchError(f"{name}: cannot read file: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LlamaBenchError(f"{name}: not UTF-8 text (byte {exc.start})") from exc
    fmt, rows = parse(text, name)
    return BenchFile(path, hashlib.sha256(raw).hexdigest(), fmt, rows)


def store_file(store: Store, bench: BenchFile) -> dict:
    """Store a checked file in one transaction; ``{"import_id", "rows", "format", "already": bool}``."""
    fmt, rows, sha = bench.format, bench.rows, bench.sha256
    existing = store.db.execute("select id, rows from llama_bench_imports where sha256 = ?", [sha]).fetchone()
    if existing:
        return {"import_id": existing[0], "rows": existing[1], "format": fmt, "already": True}
    conn = store.db.conn
    try:
        with conn:
            cur = conn.execute(
                "insert into llama_bench_imports (path, sha256, format, imported_at, host, rows) values (?,?,?,?,?,?)",
                [str(bench.path.resolve()), sha, fmt, utcnow(), hostinfo.host_name(), len(rows)])
            import_id = cur.lastrowid
            store.db["llama_bench_results"].insert_all([to_row(r, import_id, i) for i, r in enumerate(rows)])
    except Exception as exc:  # sqlite3 errors, named with the database
        raise StoreError(f"{store.path}: cannot store llama-bench results: {exc}") from exc
    return {"import_id": import_id, "rows": len(rows), "format": fmt, "already": False}


def import_file(store: Store, path: Path | str) -> dict:
    """Store one llama-bench output file; ``{"import_id", "rows", "format", "already": bool}``."""
    return store_file(store, read_file(path))
