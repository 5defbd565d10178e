"""The systemd journal through journalctl: export (default) or JSON output, resumed by cursor.

A journal *file* is imported whole or not at all. journalctl reads a damaged
file as far as it can and exits 0 (half a file gives half its entries and no
error), so the file's own header is read first: a file without the journal
signature is refused before anything is stored, and a read that ends short
of what the header promises (fewer entries than it counts when read from the
start, or a last entry before its tail sequence number) is refused after it,
which rolls the import back. ``journalctl --verify`` is not the test: it
fails files journalctl reads completely (appended ones with out-of-order
monotonic times), so it only explains a refusal. A read filtered by unit
cannot be held against the header's figures and is not checked.
"""

from __future__ import annotations

import json
import json.scanner
import shutil
import struct
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from cardproof.daemon.store.said import Said
from cardproof.daemon.store.file import shown
from .export import export_entries
from .lines import MAX_LINE_BYTES, RealtimeFormatter, Refusing, decode
from .pipe import ChildAhead, ChildAheadError, PipeAhead
from .reader import LogSourceError, Reader

_JOURNAL_FIELDS = "MESSAGE,_PID,_SYSTEMD_UNIT,SYSLOG_IDENTIFIER"
# the C scanner itself: json.loads adds three Python layers per line
_scan_json = json.scanner.make_scanner(json.JSONDecoder())
JOURNAL_MAGIC = b"LPKSHHRH"
# systemd's journal-def.h: the header is little-endian; these fields have been there since the first version
_SEQNUM_ID_AT, _N_ENTRIES_AT, _TAIL_SEQNUM_AT = 72, 152, 160


def journal_file_header(path: Path) -> dict:
    """``entries``, ``tail_seqnum`` and ``seqnum_id`` from a journal file's header.

    LogSourceError (one line, naming the file) when it is not a journal file.
    """
    name = shown(str(path))  # a file name may hold a newline: the message stays one line
    try:
        with open(path, "rb") as f:
            head = f.read(_TAIL_SEQNUM_AT + 8)
    except OSError as exc:
        raise LogSourceError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    if not head.startswith(JOURNAL_MAGIC):
        raise LogSourceError(f"{name}: not a systemd journal file (no journal signature); nothing imported")
    if len(head) < _TAIL_SEQNUM_AT + 8:
        raise LogSourceError(f"{name}: journal file cut short in its header; nothing imported")
    return {"entries": struct.unpack_from("<Q", head, _N_ENTRIES_AT)[0],
            "tail_seqnum": struct.unpack_from("<Q", head, _TAIL_SEQNUM_AT)[0],
            "seqnum_id": head[_SEQNUM_ID_AT:_SEQNUM_ID_AT + 16].hex()}


def _cursor_seqnum(cursor: str | None) -> tuple[str | None, int | None]:
    """``(seqnum_id, seqnum)`` from a cursor's ``s=`` and ``i=`` fields (hex)."""
    sid = seq = None
    for part in (cursor or "").split(";"):
        if part.startswith("s="):
            sid = part[2:]
        elif part.startswith("i="):
            try:
                seq = int(part[2:], 16)
            except ValueError:
                return None, None
    return sid, seq


def journal_record(obj: dict, fmt: RealtimeFormatter, warnings: Counter):
    """One ``journalctl -o json`` object as a record, or None when it has no message.

    A message longer than MAX_LINE_BYTES comes back refused: no text, its
    length in the offset's place (see ``lines.Refusing``).
    """
    msg = obj.get("MESSAGE")
    raw_bytes = None
    if isinstance(msg, list):
        if msg and isinstance(msg[0], int):
            if len(msg) > MAX_LINE_BYTES:
                return _refused(obj, fmt, len(msg))
            raw, raw_bytes = decode(bytes(msg))  # non-printable or non-UTF-8 message
        else:  # the field was given more than once: keep every value
            raw = "\n".join(bytes(v).decode("utf-8", "replace") if isinstance(v, list) else str(v) for v in msg)
    elif isinstance(msg, str):
        raw = msg
    else:
        warnings["no_message"] += 1
        return None
    # a character is one to four bytes: only a message near the limit is encoded to measure it
    if raw_bytes is None and len(raw) * 4 > MAX_LINE_BYTES:
        length = len(raw.encode("utf-8", "surrogatepass"))
        if length > MAX_LINE_BYTES:
            return _refused(obj, fmt, length)
    if raw_bytes is not None:
        warnings["non_utf8"] += 1
    pid = obj.get("_PID")
    try:
        pid = int(pid) if pid is not None else None
    except (TypeError, ValueError):
        pid = None
    unit = obj.get("_SYSTEMD_UNIT") or obj.get("SYSLOG_IDENTIFIER")
    return (fmt(obj.get("__REALTIME_TIMESTAMP")), unit, pid, obj.get("__CURSOR"), None, raw, raw_bytes)


def _refused(obj: dict, fmt: RealtimeFormatter, length: int) -> tuple:
    """A refused entry's record: where it is (its cursor), its message's length, no text."""
    return (fmt(obj.get("__REALTIME_TIMESTAMP")), None, None, obj.get("__CURSOR"), length, None, None)


class JournalReader(Reader):
    """``journalctl`` for a unit (``-u``) or a journal file (``--file``), resumed by cursor.

    The stored cursor is re-read inclusively (``--cursor``): when the first
    entry is that cursor, it is dropped and nothing is lost or repeated.
    When it is not there any more (journal rotated or vacuumed), that is a
    gap; reading then starts at the cursor's own time, and lines already
    stored are recognised by their cursor.

    ``output`` is ``export`` by default: journalctl writes its export format
    about six times faster than JSON on these machines (0.8 s against 5.2 s
    for 200,000 entries), and it hands over a message that is not clean text
    as its exact bytes. ``json`` reads ``-o json``, where such a message is a
    list of byte values. A whole journal's export output (no cursor yet) is
    split by a process of its own (``split_child.py`` through
    ``pipe.ChildAhead``); a read resumed at a cursor, and JSON, on a thread
    (``pipe.PipeAhead``).
    """

    def __init__(self, *, unit: str | None = None, journal_file: Path | None = None,
                 cursor: str | None = None, since: str | None = None, output: str = "export"):
        name = str(Path(journal_file).resolve()) if journal_file else unit
        if journal_file and unit:
            name = f"{name}?unit={unit}"
        super().__init__(name)
        self.kind = "journal-file" if journal_file else "journal"
        exe = shutil.which("journalctl")
        if exe is None:
            raise LogSourceError("journalctl not found: install systemd (Debian: apt-get install systemd)")
        if journal_file is not None and not Path(journal_file).is_file():
            raise LogSourceError(f"{journal_file}: no such journal file")
        if output not in ("export", "json"):
            raise ValueError(f"output must be export or json, not {output!r}")
        self.output = output
        self.base = [exe, "-o", output, "-a", "--no-pager"]
        if output == "json":
            # JSON escaping is what costs in journalctl: fewer fields, less of it. In export
            # format the field filter costs more than it saves (1.0 s against 0.75 s here).
            self.base.append(f"--output-fields={_JOURNAL_FIELDS}")
        if journal_file:
            self.base += ["--file", str(journal_file)]
        if unit:
            self.base += ["-u", unit]
        self.cursor = cursor
        self.since = since
        self.position = {"cursor": cursor}
        self._fmt = RealtimeFormatter()
        self.journal_file = Path(journal_file) if journal_file else None
        self.unit = unit
        self.entries_read = 0  # every entry journalctl handed over, with or without a message
        # set by the importer while it waits on SQLite: the reading thread may split ahead then (pipe.py)
        self.io_window = threading.Event()
        # read now, before an import touches the store: a file that is not a journal is refused first
        self.header = journal_file_header(self.journal_file) if self.journal_file else None

    def batches(self):
        yield from self._batches()
        if self.header is not None and not self.unit:
            self._check_complete()

    def _check_complete(self) -> None:
        """Raise (rolling the import back) when journalctl stopped short of what the file's header promises."""
        h = self.header
        read = self.entries_read + self.warnings["no_message"] + self.warnings["bad_json"]
        short = None
        if not self.cursor and not self.since and read < h["entries"]:
            short = f"journalctl read {read:,} of the {h['entries']:,} entries its header counts"
        else:
            sid, seq = _cursor_seqnum(self.position.get("cursor"))
            if sid == h["seqnum_id"] and seq is not None and seq < h["tail_seqnum"]:
                short = f"journalctl stopped at entry {seq:,} of {h['tail_seqnum']:,}"
        if short:
            raise LogSourceError(f"{shown(str(self.journal_file))}: journal file damaged: {short} "
                                 f"({self._verify()}); nothing imported")

    def _verify(self) -> str:
        """journalctl --verify's verdict on the file as one line: it explains a refusal, it does not decide one."""
        try:
            proc = subprocess.run(self.base[:1] + ["--verify", "--file", str(self.journal_file)],
                                  capture_output=True, timeout=600)
        except subprocess.TimeoutExpired:
            return "journalctl --verify: no verdict within 600 s"
        lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        # the line that says where, else the FAIL/PASS summary
        where = [ln for ln in lines if "corruption" in ln.lower()] or [ln for ln in lines if ln.startswith("FAIL")]
        return "journalctl --verify: " + (where or lines or [f"exit {proc.returncode}"])[0][:200]

    def _batches(self):
        if self.cursor:
            found = yield from self._run(["--cursor", self.cursor], expect=self.cursor)
            if found:
                return
            self.gaps.append((Said("journal cursor not found (journal rotated or vacuumed); read from its time on"),
                              None))
            since = _cursor_time(self.cursor)
            self.dedupe = True
            yield from self._run(["--since", since] if since else [], expect=None)
        else:
            yield from self._run(["--since", self.since] if self.since else [], expect=None)

    def _take(self, ahead, expect: str | None):
        """Yield ``ahead``'s batches, the re-read cursor ``expect`` dropped; returns ``(found, finished)``.

        ``found``: the stored cursor was the first entry (or none was
        expected); ``finished``: every batch was read. A first entry that is
        not the expected cursor ends the read at once: the caller records
        the gap and reads again by time.
        """
        found = expect is None
        first = True
        t0 = time.perf_counter()
        for batch in ahead:
            self.entries_read += len(batch)
            refusing = type(batch) is Refusing
            if first and batch and expect is not None:
                first = False
                if batch[0][3] != expect:
                    return found, False  # cursor gone
                found = True
                batch = batch[1:]  # stored (or refused) by the previous capture
            if batch:
                first = False
                # a refused entry moves the cursor too: the next capture must not refuse it again
                self.position["cursor"] = batch[-1][3]
                if refusing:
                    batch = self._refuse_entries(batch)
                self.read_seconds += time.perf_counter() - t0  # waiting for the reader
                yield batch
                t0 = time.perf_counter()
        self.read_seconds += time.perf_counter() - t0
        return found, True

    def _refuse_entries(self, batch: list) -> list:
        """The batch's records to store; its refused entries (text None) are named by cursor and length."""
        keep = []
        for rec in batch:
            if rec[5] is None:
                self.refuse({"cursor": rec[3]}, rec[4])
            else:
                keep.append(rec)
        return keep

    def _run(self, extra: list[str], expect: str | None):
        if self.output == "export" and self.cursor is None:
            # a whole journal or a unit's first read: worth a splitting process of its own. A read
            # resumed at a cursor (the daemon's capture every few seconds) brings a few lines; the
            # process's start-up (about 20 ms of CPU) would cost more than it saves
            return (yield from self._run_child(extra, expect))
        proc = subprocess.Popen(self.base + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        found = finished = False
        # journalctl writes, and its output is split, beside this thread's parsing and storing
        parse = self._export_entries if self.output == "export" else self._json_entries
        ahead = PipeAhead(proc.stdout, parse, self.io_window)
        try:
            found, finished = yield from self._take(ahead, expect)
        finally:
            if not finished or not found:
                proc.kill()
            ahead.close()  # before stdout closes: the thread must not read a closed (or reused) descriptor
            self.read_cpu_seconds += ahead.cpu_seconds  # the reading thread's CPU: reading and splitting
            proc.wait()
            err = proc.stderr.read().decode("utf-8", "replace")
            proc.stdout.close()
            proc.stderr.close()
        if finished:
            self._ended(found, ahead.rest, proc.returncode, err)
        return found

    def _run_child(self, extra: list[str], expect: str | None):
        """The export format, read and split by a process of its own beside this one (``pipe.ChildAhead``)."""
        ahead = ChildAhead(self.base + extra)
        found = finished = False
        try:
            found, finished = yield from self._take(ahead, expect)
        except ChildAheadError as exc:
            raise LogSourceError(f"{self.name}: {exc}") from exc
        finally:
            ahead.close()  # ends the splitting process and its journalctl when the read stopped early
            self.read_cpu_seconds += ahead.cpu_seconds  # this process's share: unpickling the batches
            self.split_cpu_seconds += ahead.child_cpu_seconds
        if finished:
            self.warnings.update(ahead.warnings)
            self._ended(found, ahead.rest, ahead.returncode, ahead.stderr)
        return found

    def _ended(self, found: bool, rest: bytes, returncode: int | None, err: str) -> None:
        """After a read to its end: an unfinished last entry is counted; a journalctl that failed fails the import."""
        if rest.strip():
            self.warnings["incomplete_entry"] += 1
        if found and returncode != 0:
            raise LogSourceError(f"{self.name}: journalctl failed (exit {returncode}): {err.strip() or 'no message'}")

    def _export_entries(self, buf: bytes):
        return export_entries(buf, self._fmt, self.warnings)

    def _json_entries(self, data: bytes):
        lines = data.split(b"\n")
        pending = lines.pop()
        out = []
        for line in lines:
            rec = json_line_record(line, self._fmt, self.warnings)
            if rec is not None:
                if rec[5] is None and type(out) is list:
                    out = Refusing(out)
                out.append(rec)
        return out, pending


def json_line_record(line: bytes, fmt: RealtimeFormatter, warnings: Counter):
    """One line of ``journalctl -o json`` as a record; None (counted) when it is not one."""
    if not line.strip():
        return None
    try:
        obj = _scan_json(line.decode("utf-8"), 0)[0]
    except (ValueError, StopIteration, UnicodeDecodeError):
        warnings["bad_json"] += 1
        return None
    if not isinstance(obj, dict):
        warnings["bad_json"] += 1
        return None
    return journal_record(obj, fmt, warnings)


def _cursor_time(cursor: str) -> str | None:
    """``@seconds`` from a cursor's ``t=`` field (hex microseconds), for ``--since``."""
    for part in cursor.split(";"):
        if part.startswith("t="):
            try:
                return f"@{int(part[2:], 16) // 1_000_000}"
            except ValueError:
                return None
    return None
