"""The capture pipeline: read, attribute, parse, store -- one transaction per import.

An import stores every line it reads (raw text unchanged), the facts parsed
from it, the loads it discovered, and where the next import starts, all in
one transaction: a crash leaves the store as it was, and re-running imports
only what is new. A log file's backlog is captured in chunks of
CAPTURE_CHUNK_LINES lines, each such a transaction, so other writers get
the lock between them; a journal is always one.
"""

from __future__ import annotations

import gc
import json
from bisect import bisect_left
from operator import itemgetter
import sqlite3
import sys
import time
from itertools import chain
from pathlib import Path
from typing import Callable

from cardproof.daemon.store.said import english, said_json
from ..store import Store, StoreError, json_text, utcnow
from cardproof.daemon.store.file import BUSY_TIMEOUT_S, shown
from .access import parse_access, record_requests
from .attribution import Attributor, scope_facts
from .context import state_context
from .lines import clean_stamped
from .observed import RequestCounters
from .parsers import MARKERS, parse_line, trigger_search
from .parsers.crash import crash_pid
from .sources import FileReader, JournalReader, LogSourceError, detect_format, file_identity

# per line; source_id and run_id are the same for a whole import and go into the statement
_LINE_COLS = ("id", "ts", "unit", "pid", "port", "cursor", "offset", "raw", "raw_bytes", "load_id", "attribution")
_FACT_COLS = ("id", "load_id", "line_id", "name", "device", "value_num", "value_text", "unit")
_LINE_OF_FACT = itemgetter(2)
_ROWS_PER_INSERT = 1000
_INSERT_FACT = f"insert into facts ({', '.join(_FACT_COLS)}) values ({', '.join('?' * len(_FACT_COLS))})"
_LOAD_COLS = {"model_name", "model_file", "port", "pid", "start_line_id", "ready_line_id", "end_line_id",
              "exit_status", "requested_at", "ready_at", "ended_at", "end_reason", "status"}
PROGRESS_EVERY = 50_000
# SQLite page cache while an import runs (KiB); the connection's own size comes back after it
IMPORT_CACHE_KIB = 64 * 1024
_FLUSH_ROWS = 20_000
# ... or this many characters of text, whichever comes first: lines may be up to
# lines.MAX_LINE_BYTES long, and 20,000 of those must not wait in memory together
_FLUSH_CHARS = 64 << 20
# How long an import waits for the write lock. ``cardproof logs import`` waits long: another
# import of a long journal may hold the lock for minutes. Captures (the daemon's collectors,
# a run's) wait as long as any other write: the daemon's main loop must come back to its
# watchdog, and a run notes a capture that could not wait and goes on.
IMPORT_LOCK_WAIT_S = 600.0
# A log file is captured in transactions of about this many lines (2-4 s of work here), each
# storing where the next one starts: the write lock is never held for a whole backlog.
CAPTURE_CHUNK_LINES = 100_000
# between chunks the lock is free this long: SQLite's busy handler retries every 100 ms at most,
# so a writer that waits gets in before the next chunk instead of missing the moment
_BETWEEN_CHUNKS_S = 0.2
# Python's thread switch interval while an import runs (s; the default is 0.005). The journal's
# reading thread (``-o json``; export output is split by a process of its own, pipe.ChildAhead, and
# its thread only unpickles the batches) splits journalctl's output while the importing thread waits on SQLite; each
# statement ends with the importer asking for Python's lock back, and at the default it waited
# up to 5 ms for the reader to let go, 200 times per 200,000 lines. Measured with
# bench/log_import.py's journal, four runs each: 3.16 s against 3.34 s for the whole CLI import.
IMPORT_SWITCH_INTERVAL_S = 0.001


class _Writer:
    """Buffers rows, assigns ids, and is the Attributor's hook into the store.

    Rows go in with multi-row ``insert`` statements rather than sqlite-utils'
    ``insert_all``: on these machines insert_all took 10 s for 200,000 lines
    where executemany took 1.8 s, and the import must keep pace with
    journalctl. (Inserting on a second thread was tried and measured: the
    parsing thread holds Python's lock nearly all the time, so the writer
    waited for it and the import got slower, not faster.)
    """

    def __init__(self, store: Store, source_id: int, run_id: int | None):
        self.conn = store.db.conn
        self.source_id = source_id
        self.run_id = run_id
        # taken under the import's write lock: no other writer can take these ids meanwhile
        self.next_line = (self.conn.execute("select max(id) from log_lines").fetchone()[0] or 0) + 1
        self.next_fact = (self.conn.execute("select max(id) from facts").fetchone()[0] or 0) + 1
        self.lines: list[tuple] = []
        # the constant columns as literals (ints or NULL), the rest bound
        consts = f"{int(source_id)}, {'NULL' if run_id is None else int(run_id)}, "
        cols = ", ".join(("source_id", "run_id") + _LINE_COLS)
        one = "(" + consts + ", ".join("?" * len(_LINE_COLS)) + ")"
        self.insert_one = f"insert into log_lines ({cols}) values {one}"
        self.insert_bulk = f"insert into log_lines ({cols}) values " + ", ".join([one] * _ROWS_PER_INSERT)
        self.facts: list[tuple] = []
        self.first_buffered = self.next_line
        self.stats = {"loads": 0, "facts": 0}
        self._models: dict[str, int | None] = {}

    # -- Attributor hooks ---------------------------------------------------
    def new_load(self, **cols) -> int:
        cols = {k: v for k, v in cols.items() if k in _LOAD_COLS}
        name = cols.get("model_name")
        cols.update(origin="log", source_id=self.source_id, run_id=self.run_id, model_id=self._model_id(name))
        keys = list(cols)
        cur = self.conn.execute(
            f"insert into loads ({', '.join(keys)}) values ({', '.join('?' * len(keys))})", [cols[k] for k in keys]
        )
        self.stats["loads"] += 1
        return cur.lastrowid

    def update_load(self, load_id: int, **cols) -> None:
        cols = {k: v for k, v in cols.items() if k in _LOAD_COLS}
        if "ready_line_id" in cols:
            cols.setdefault("status", "loaded")
        if "ready_at" in cols and cols["ready_at"] is None:
            del cols["ready_at"]
        if "ended_at" in cols and cols["ended_at"] is None:
            del cols["ended_at"]
        if cols:
            sets = ", ".join(f"{k} = ?" for k in cols)
            self.conn.execute(f"update loads set {sets} where id = ?", [*cols.values(), load_id])

    def crashed(self, load_id: int, line_id: int, ts: str | None, reason: str, exit_status: int | None) -> None:
        """A line says the load's process died (``reason``: ``crashed: ...``): the load ends there.

        Nothing in its own output says so (a process dies by a signal without a word); its shell,
        supervisor, kernel or router does, after it. A crash already named (an assert, a CUDA error,
        read by processes.py on the same or an earlier line) stays the reason; a load that was never
        ready failed. Evaluated by SQLite on the row as it is: the stream's state cannot be stale.
        """
        self.conn.execute(
            "update loads set status = case when status = 'loaded' then status else 'failed' end, "
            "end_reason = case when end_reason like 'crashed: %' then end_reason else ? end, "
            "end_line_id = case when end_reason like 'crashed: %' then end_line_id else ? end, "
            "ended_at = case when end_reason like 'crashed: %' then ended_at else coalesce(?, ended_at) end, "
            "exit_status = coalesce(exit_status, ?) where id = ?",
            [reason, line_id, ts, exit_status, load_id])

    def load_of_pid(self, pid: int) -> int | None:
        """The latest load of this source whose process had ``pid``."""
        row = self.conn.execute("select id from loads where source_id = ? and pid = ? order by id desc limit 1",
                                [self.source_id, pid]).fetchone()
        return row[0] if row else None

    def bind(self, line_ids: list[int], load_id: int, attribution: str) -> None:
        """Lines held back until their process named its model now join that load."""
        old = []
        for lid in line_ids:
            i = lid - self.first_buffered
            if 0 <= i < len(self.lines):
                self.lines[i] = self.lines[i][:-2] + (load_id, attribution)
            else:
                old.append((load_id, attribution, lid))
        facts = self.facts
        if facts and line_ids:
            # facts are buffered in line order: only those from the first held line on can be its
            ids = set(line_ids)
            for i in range(bisect_left(facts, min(ids), key=_LINE_OF_FACT), len(facts)):
                f = facts[i]
                if f[1] is None and f[2] in ids:
                    facts[i] = (f[0], load_id) + f[2:]
        if old:
            self.conn.executemany("update log_lines set load_id = ?, attribution = ? where id = ?", old)
            self.conn.executemany("update facts set load_id = ? where line_id = ? and load_id is null",
                                  [(lo, lid) for lo, _, lid in old])

    def _model_id(self, name: str | None) -> int | None:
        if not name:
            return None
        if name not in self._models:
            row = self.conn.execute("select id from models where name = ? order by id desc limit 1", [name]).fetchone()
            self._models[name] = row[0] if row else None
        return self._models[name]

    def flush(self) -> None:
        """Store the buffered lines and facts."""
        lines, facts = self.lines, self.facts
        conn = self.conn
        # one statement per 1000 rows: binding is the same, statement overhead a thousandth
        k = _ROWS_PER_INSERT
        full = len(lines) - len(lines) % k
        for i in range(0, full, k):
            conn.execute(self.insert_bulk, list(chain.from_iterable(lines[i:i + k])))
        if full < len(lines):
            conn.executemany(self.insert_one, lines[full:])
        if facts:
            conn.executemany(_INSERT_FACT, facts)
            self.stats["facts"] += len(facts)
        self.lines, self.facts = [], []
        self.first_buffered = self.next_line


def _source(conn, kind: str, name: str) -> dict:
    """The source's row (where the last import stopped), created if new; read under the write lock."""
    row = conn.execute("select id, cursor, offset, inode, state_json from log_sources where kind = ? and name = ?",
                       [kind, name]).fetchone()
    if row is None:
        cur = conn.execute("insert into log_sources (kind, name, updated_at) values (?, ?, ?)", [kind, name, utcnow()])
        return {"id": cur.lastrowid, "cursor": None, "offset": 0, "inode": None, "state": None}
    return {"id": row[0], "cursor": row[1], "offset": row[2] or 0, "inode": row[3],
            "state": json.loads(row[4]) if row[4] else None}


def _redirects(conn) -> dict[int, int]:
    """Log loads that attribute_run merged into runner rows: old id -> new id."""
    rows = conn.execute("select id, merged_into from loads where merged_into is not null and origin = 'log'").fetchall()
    return {a: b for a, b in rows}


def _import_lines(conn, w: _Writer, reader, source: dict, run_id, started, progress, max_lines=None):
    """The loop over every line: clean, attribute, parse, buffer; full buffers are stored as they fill.

    With ``max_lines`` it stops after the first batch that reaches it where
    the reader can resume (``more`` is then True).
    """
    attr = Attributor(source["state"], w)
    attr.redirect(_redirects(conn))
    observed = RequestCounters((source["state"] or {}).get("observed"))
    known = _known_cursors(conn, reader, source["id"])
    n = dup = 0
    held = 0  # characters of text buffered since the last flush
    lid = w.next_line
    fid = w.next_fact
    sid = source["id"]
    lines, facts = w.lines, w.facts
    feed = attr.feed
    has_trigger = trigger_search()  # most lines carry no fact: one C-level scan decides
    markers = MARKERS
    next_report = PROGRESS_EVERY
    accesses: list = []
    more = False
    batches = reader.batches()
    window = getattr(reader, "io_window", None)
    for batch in batches:
        for ts, unit, pid, cursor, offset, raw, raw_bytes in batch:
            if known is not None and cursor in known:
                dup += 1
                continue
            port, spid, text, stamp, stream = clean_stamped(raw)
            if pid is None:
                pid = spid
            if ts is None:
                ts = stamp  # a container or collector prefix's own time
            load, how, extra = feed(lid, pid, port, text, ts, stream)
            found = None
            m = has_trigger(text)
            if m is not None:
                if "time =" in text or "print_timing" in text or "acceptance" in text:
                    observed.feed(lid, load, text, ts)  # the server's own per-request counters
                access = parse_access(text)
                if access is not None:
                    accesses.append((lid, ts, access))
                if access is None or m[0] not in markers:  # an access line has no fact triggers to look for
                    found = parse_line(text)
            if extra:
                found = (found or []) + extra
            if found:  # few lines: the per-line cost of a call is paid only here
                load, how, fid = _line_facts(attr, w, facts, found, text, lid, ts, load, how, fid)
            lines.append((lid, ts, unit, pid, port, cursor, offset, raw, raw_bytes, load, how))
            held += len(raw)
            lid += 1
            n += 1
        w.next_line, w.next_fact = lid, fid
        if len(lines) >= _FLUSH_ROWS or held >= _FLUSH_CHARS:
            held = 0
            if window is not None:
                window.set()  # SQLite runs without Python's lock: the reader may split ahead meanwhile
            w.flush()
            if window is not None:
                window.clear()
            lines, facts = w.lines, w.facts
        if progress and n >= next_report:
            rate = n / max(time.perf_counter() - started, 1e-9)
            progress(f"{reader.name}: {n:,} lines imported ({rate:,.0f} lines/s)")
            next_report += PROGRESS_EVERY
        if max_lines is not None and n >= max_lines and reader.resumable:
            more = True
            break
    batches.close()
    w.flush()
    requests = record_requests(conn, run_id, accesses)  # access lines -> requests_seen
    attr.observed_count = observed.store(conn, sid, run_id)
    attr.observed_state = observed.state()
    _record_gaps(conn, sid, reader.gaps)
    if hasattr(reader, "finish"):
        reader.finish()
    return n, dup, lid, requests, attr, more


def _known_cursors(conn, reader, source_id: int) -> set | None:
    """The journal cursors already stored from this source, where the reader can meet a line again."""
    if not reader.dedupe:
        return None
    return {r[0] for r in conn.execute("select cursor from log_lines where source_id = ? and cursor is not null",
                                       [source_id])}


def _line_facts(attr, w: _Writer, facts: list, found: list, text: str, lid: int, ts, load, how, fid: int):
    """A line's facts buffered (scoped to a draft or SWA part of its load, a crash placed on the process the
    kernel or systemd names); returns the line's (load, how attributed, the next fact id)."""
    if load is None and any(f.name == "crash_signal" for f in found):
        # the kernel's or systemd's words on another stream: the PID the kernel names is the process's
        named = attr.load_of_pid(crash_pid(text))
        if named is None and "Main process exited" in text:  # systemd, of a unit's main process
            named = attr.only_open_load()
        if named is not None and attr.streams.claimed(lid):
            load, how = named, "pid"
    if load is not None and (load in attr.draft or load in attr.swa):
        found = scope_facts(found, load in attr.draft, load in attr.swa)
    for f in found:
        facts.append((fid, load, lid, f.name, f.device, f.value_num, f.value_text, f.unit))
        fid += 1
        if f.name == "crash_signal" and load is not None:
            w.crashed(load, lid, ts, f"crashed: {f.value_text}", -int(f.value_num or 0) or None)
            attr.streams.crashed(load)  # what its stream prints next is no longer its own
    return load, how, fid


def _record_gaps(conn, source_id: int, gaps) -> None:
    """Where the capture skipped lines, and why (a message id with its values)."""
    for reason, skipped in gaps:
        structured = said_json(reason)
        conn.execute("insert into capture_gaps (source_id, at, reason, reason_json, lines_skipped) "
                     "values (?, ?, ?, ?, ?)", [source_id, utcnow(), english(reason),
                                                json_text(structured) if structured else None, skipped])


def run_import(store: Store, kind: str, name: str, make_reader: Callable[[dict], object], *,
               run_id: int | None = None, progress: Callable[[str], None] | None = None,
               lock_wait_s: float = BUSY_TIMEOUT_S, max_lines: int | None = None) -> dict:
    """Read source ``kind``/``name`` into the store; returns counts (see :func:`capture_file`).

    The whole import holds the write lock from its first read of the
    store: where the source stopped, the next free line and fact ids and
    the stored lines are all read under it, so two imports of one source
    (two ``cardproof logs import``, the daemon and a run's final capture)
    take turns and every line is stored once. ``make_reader(source)``
    builds the reader from the source's stored position; ``lock_wait_s`` is
    how long to wait for another writer's lock in all. ``max_lines`` ends the
    import early where the reader can resume (the result's ``more``).
    """
    conn = store.db.conn
    started, started_cpu = time.perf_counter(), time.process_time()
    # An import is idempotent (it resumes at the stored cursor/offset), so its commit need not
    # wait for the disk: after a power cut the source is simply read again. WAL keeps the file
    # consistent either way; the store's own setting comes back right after.
    if conn.in_transaction:
        conn.commit()  # the level cannot change inside a transaction
    sync = conn.execute("pragma synchronous").fetchone()[0]
    conn.execute("pragma synchronous = NORMAL")
    # An import writes its whole transaction before it commits: with SQLite's default cache
    # (2 MiB) the dirty pages of the line and index b-trees are spilled to the WAL and read back
    # again and again (about 7 % of the importing thread's CPU for 200,000 lines). The cache is
    # given back when the import ends.
    cache = conn.execute("pragma cache_size").fetchone()[0]
    conn.execute(f"pragma cache_size = {-IMPORT_CACHE_KIB}")
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, IMPORT_SWITCH_INTERVAL_S))
    waiting = (lambda: progress(f"{name}: waiting for another writer to finish")) if progress else None
    try:
        with store.write_lock(wait_s=lock_wait_s, on_wait=waiting):
            source = _source(conn, kind, name)
            reader = make_reader(source)
            return _run_import(store, conn, reader, source, run_id, started, started_cpu, progress, max_lines)
    except sqlite3.Error as exc:  # rolled back: the store is as it was, the next import starts at the same place
        raise StoreError(f"{shown(store.path)}: import of {name} not stored: {exc}") from exc
    finally:
        conn.execute(f"pragma synchronous = {int(sync)}")
        conn.execute(f"pragma cache_size = {int(cache)}")
        sys.setswitchinterval(switch)


def _run_import(store, conn, reader, source, run_id, started, started_cpu, progress, max_lines=None) -> dict:
    """The import inside the caller's write transaction."""
    sid = source["id"]
    w = _Writer(store, sid, run_id)
    first_fact = w.next_fact
    # the import makes millions of small objects and frees none of them before it ends:
    # the cyclic collector would rescan the growing buffers again and again for nothing
    collecting = gc.isenabled()
    gc.disable()
    try:
        n, dup, lid, requests, attr, more = _import_lines(conn, w, reader, source, run_id, started, progress,
                                                          max_lines)
    finally:
        if collecting:
            gc.enable()
    # a load whose slots spoke in this import may state its context through them (context.py)
    slotted = [r[0] for r in conn.execute("select distinct load_id from facts where id >= ? and name = 'slot_ctx_size' "
                                          "and load_id is not null", [first_fact])]
    if slotted:
        w.stats["facts"] += state_context(conn, slotted)
    pos = reader.position
    state = attr.state()
    state["observed"] = attr.observed_state
    if pos.get("head") is not None:
        state["file_head"] = pos["head"]
    conn.execute(
        "update log_sources set cursor = coalesce(?, cursor), offset = coalesce(?, offset), "
        "inode = coalesce(?, inode), state_json = ?, updated_at = ? where id = ?",
        [pos.get("cursor"), pos.get("offset"), pos.get("inode"), json_text(state), utcnow(), sid],
    )
    unattributed = conn.execute(
        "select count(*) from log_lines where id >= ? and id < ? and source_id = ? and load_id is null",
        [lid - n, lid, sid],
    ).fetchone()[0] if n else 0
    return {
        "source_id": sid,
        "kind": reader.kind,
        "name": reader.name,
        "lines": n,
        "attributed": n - unattributed,
        "unattributed": unattributed,
        "facts": w.stats["facts"],
        "loads": w.stats["loads"],
        "gaps": len(reader.gaps),
        "duplicates_skipped": dup,
        "requests": requests,
        "observed_requests": attr.observed_count,
        "unplaced": dict(attr.unplaced),  # this import's unattributed lines by reason (see attribution.py)
        "held": attr.held(),  # lines waiting for their process to start or name its model
        "warnings": dict(reader.warnings),
        # lines longer than lines.MAX_LINE_BYTES, not stored: {"offset" or "cursor", "bytes"} each
        "refused": list(reader.refused),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - started_cpu,
        "read_seconds": reader.read_seconds,
        "read_cpu_seconds": reader.read_cpu_seconds,
        "split_cpu_seconds": reader.split_cpu_seconds,  # a journal's splitting process (pipe.ChildAhead)
        "more": more,
        "line_ids": (lid - n, lid),  # this import's lines: ids from, to (exclusive)
    }


def _add(total: dict | None, part: dict) -> dict:
    """The counts of two parts of one capture, as if it had been one."""
    if total is None:
        return dict(part)
    out = dict(part)
    for key in ("lines", "attributed", "unattributed", "facts", "loads", "gaps", "duplicates_skipped", "requests",
                "seconds", "cpu_seconds", "read_seconds", "read_cpu_seconds", "split_cpu_seconds"):
        if isinstance(total.get(key), (int, float)) and isinstance(part.get(key), (int, float)):
            out[key] = total[key] + part[key]
    warnings = dict(total.get("warnings") or {})
    for key, count in (part.get("warnings") or {}).items():
        warnings[key] = warnings.get(key, 0) + count
    out["warnings"] = warnings
    out["refused"] = list(total.get("refused") or []) + list(part.get("refused") or [])
    return out


def capture_file(store: Store, path: Path | str, *, run_id: int | None = None, final: bool = False,
                 fmt: str = "plain", progress: Callable[[str], None] | None = None,
                 lock_wait_s: float = BUSY_TIMEOUT_S) -> dict:
    """Import the lines added to a log file since the last capture (``--log-file`` or redirected stderr).

    Idempotent: the byte offset and inode are stored with the source, so a
    second call reads only new lines (a long backlog is stored in chunks of
    CAPTURE_CHUNK_LINES, each its own transaction); rotation and truncation are recorded
    as capture gaps. ``fmt`` is ``plain`` or ``journal-json`` (a
    ``journalctl -o json`` export). Returns counts: ``lines``, ``attributed``,
    ``unattributed``, ``facts``, ``loads``, ``gaps``, ``warnings``.
    """
    path = Path(path)
    kind = "journal-json" if fmt == "journal-json" else "plain"
    # what was written before this capture began; later lines are the next capture's
    try:
        until = path.stat().st_size
    except OSError:
        until = None  # FileReader names the error

    def reader(src: dict) -> FileReader:
        return FileReader(path, offset=src["offset"], inode=src["inode"], final=final,
                          journal_json=(kind == "journal-json"), head=(src["state"] or {}).get("file_head"),
                          until=until)

    # one transaction per CAPTURE_CHUNK_LINES: a long backlog never keeps other writers
    # (a run storing its samples, the daemon's heartbeat) out longer than one chunk takes
    total = None
    spans = []
    while True:
        part = run_import(store, kind, file_identity(path), reader, run_id=run_id, progress=progress,
                          lock_wait_s=lock_wait_s, max_lines=CAPTURE_CHUNK_LINES)
        total = _add(total, part)
        spans.append(part["line_ids"])
        if not part["more"]:
            break
        time.sleep(_BETWEEN_CHUNKS_S)
    if len(spans) > 1:  # lines a later chunk bound to their load count as attributed
        total["unattributed"] = sum(store.db.conn.execute(
            "select count(*) from log_lines where id >= ? and id < ? and source_id = ? and load_id is null",
            [a, b, total["source_id"]]).fetchone()[0] for a, b in spans)
        total["attributed"] = total["lines"] - total["unattributed"]
    return total


def capture_journal(store: Store, unit: str | None = None, *, run_id: int | None = None,
                    journal_file: Path | str | None = None, since: str | None = None,
                    output: str = "export", progress: Callable[[str], None] | None = None,
                    lock_wait_s: float = BUSY_TIMEOUT_S) -> dict:
    """Import a unit's journal (``journalctl -u UNIT``) or a journal file, resuming at the stored cursor.

    ``since`` (any ``journalctl --since`` value) limits the first capture of
    a source; later captures always resume at the cursor. ``output`` is
    journalctl's ``export`` (default, fast) or ``json`` format.
    """
    if not unit and not journal_file:
        raise LogSourceError("capture_journal needs a unit or a journal file")
    probe = JournalReader(unit=unit, journal_file=Path(journal_file) if journal_file else None)

    def reader(src: dict) -> JournalReader:
        return JournalReader(unit=unit, journal_file=Path(journal_file) if journal_file else None,
                             cursor=src["cursor"], since=since, output=output)

    return run_import(store, probe.kind, probe.name, reader, run_id=run_id, progress=progress,
                      lock_wait_s=lock_wait_s)


def import_path(store: Store, path: Path | str, *, fmt: str = "auto", run_id: int | None = None,
                journal_output: str = "export", progress: Callable[[str], None] | None = None) -> dict:
    """``cardproof logs import``: a finished log file, JSON export or journal file, by format."""
    path = Path(path)
    if not path.exists():
        raise LogSourceError(f"{path}: no such file")
    if path.is_dir():
        raise LogSourceError(f"{path}: is a directory; give a log file or a journal file")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "journal-file":
        return capture_journal(store, journal_file=path, run_id=run_id, output=journal_output, progress=progress,
                               lock_wait_s=IMPORT_LOCK_WAIT_S)
    if fmt not in ("plain", "journal-json"):
        raise LogSourceError(f"unknown format {fmt!r}; use auto, journal-json, journal-file or plain")
    return capture_file(store, path, run_id=run_id, final=True, fmt=fmt, progress=progress,
                        lock_wait_s=IMPORT_LOCK_WAIT_S)
