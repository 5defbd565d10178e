"""Where log lines come from: a plain log file or a ``journalctl -o json`` export.

Each reader yields records ``(ts, unit, pid, cursor, offset, raw, raw_bytes)``
in batches and knows where the next read starts (byte offset and inode for
files, the journal cursor for journals: see journal.py). A position that no
longer exists (a truncated file, a rotated-away journal) is reported as a
gap, never skipped silently.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cardproof.daemon.store.said import Said
from .journal import JournalReader, json_line_record
from .lines import MAX_LINE_BYTES, RealtimeFormatter
from .reader import LogSourceError, Reader

__all__ = ["FileReader", "JournalReader", "LogSourceError", "detect_format", "file_identity"]

JOURNAL_MAGIC = b"LPKSHHRH"
_CHUNK_BYTES = 4 << 20
_BLOB_LINE_END = b" blob data]\n"
_HEAD_BYTES = 256


def detect_format(path: Path) -> str:
    """``journal-file`` (binary journal), ``journal-json`` (``journalctl -o json``) or ``plain``."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as exc:
        raise LogSourceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if head.startswith(JOURNAL_MAGIC):
        return "journal-file"
    first = head.lstrip().split(b"\n", 1)[0]
    if first.startswith(b"{"):
        try:
            obj = json.loads(first)
        except ValueError:
            return "plain"
        if isinstance(obj, dict) and ("MESSAGE" in obj or "__CURSOR" in obj):
            return "journal-json"
    return "plain"


class FileReader(Reader):
    """A file tailed by byte offset; ``journal_json`` parses each line as a journal entry.

    Rotation: a different inode at the path means the file was rotated; the
    rest of the old file is read from ``PATH.1`` when that is the old inode,
    otherwise the unread rest is a gap. A file shorter than the stored
    offset was truncated: a gap, and reading starts again at 0.
    ``final`` reads a last line that has no newline yet (a finished file);
    otherwise it waits for the writer to complete it. ``until`` stops reading
    the current file at that byte (its size when a capture began): a writer
    faster than the reader must not keep one capture going for ever.
    A line is stored whole up to MAX_LINE_BYTES and refused beyond it (see
    ``_read``); ``position["offset"]`` is always the first byte of a line.
    """

    def __init__(self, path: Path, *, offset: int = 0, inode: int | None = None, final: bool = False,
                 journal_json: bool = False, head: str | None = None, until: int | None = None):
        super().__init__(str(path))
        self.until = until
        self.kind = "journal-json" if journal_json else "plain"
        self.path = Path(path)
        self.final = final
        self.journal_json = journal_json
        self._fmt = RealtimeFormatter()
        try:
            st = self.path.stat()
        except OSError as exc:
            raise LogSourceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        if not self.path.is_file():
            raise LogSourceError(f"{path}: not a regular file")
        self._plan: list[tuple[Path, int]] = []
        if inode is not None and st.st_ino != inode:
            rotated = self.path.with_name(self.path.name + ".1")
            if rotated.exists() and rotated.stat().st_ino == inode:
                self._plan.append((rotated, offset))
            else:
                self.gaps.append((Said("file rotated; the unread rest of the previous file is gone"), None))
            offset = 0
        elif st.st_size < offset:
            self.gaps.append((Said("file truncated from {offset_bytes:,} to {size_bytes:,} bytes",
                                   {"offset_bytes": offset, "size_bytes": st.st_size}), None))
            offset = 0
        elif head and offset and _head(self.path, len(head) // 2) != head:
            # a deleted file's inode number can be reused by its successor
            self.gaps.append((Said("file replaced (same inode, different beginning); the unread rest is gone"), None))
            offset = 0
        self._plan.append((self.path, offset))
        self.position = {"offset": offset, "inode": st.st_ino}

    def finish(self) -> None:
        """Remember how the file begins, to tell a replaced file from a grown one."""
        self.position["head"] = _head(self.path, _HEAD_BYTES)

    def batches(self):
        for path, offset in self._plan:
            is_current = path == self.path
            # an import may stop after a batch of the current file: its position says where to go on
            self.resumable = is_current
            yield from self._read(path, offset, is_current)

    def _read(self, path: Path, offset: int, is_current: bool):
        """Batches of the complete lines from ``offset`` on; ``position["offset"]`` follows the last one.

        ``offset`` is always the first byte of the line not yet ended: a line
        without its newline at the end of a read that is not final is read
        again, from that byte, by the next one. A line that grows past
        MAX_LINE_BYTES is no longer kept (:class:`_Unfinished`): it is counted
        to its newline and refused, so a newline-free blob of any size costs
        the limit and a chunk of memory.
        """
        final = self.final or not is_current
        limit = self.until if is_current and self.until is not None else None
        line = _Unfinished()
        with open(path, "rb") as f:
            f.seek(offset)
            pos = offset
            while True:
                t0, c0 = time.perf_counter(), time.process_time()
                want = _CHUNK_BYTES if limit is None else min(_CHUNK_BYTES, limit - pos)
                chunk = f.read(want) if want > 0 else b""
                if not chunk:
                    # stopped at the limit with more written after it: the unfinished line may be half a line
                    if limit is not None and pos >= limit and f.read(1):
                        final = False
                    break
                pos += len(chunk)
                if chunk.rfind(b"\n") < 0:  # no line ends in this chunk
                    line.add(chunk)
                    self._clock(t0, c0)
                    continue
                if line.skipping:  # the refused line ends at the chunk's first newline
                    first = chunk.find(b"\n")
                    line.add(chunk[:first])
                    self.refuse({"offset": offset}, line.size - line.cr)
                    offset += line.size + 1
                    line = _Unfinished()
                    data = chunk[first + 1:]
                else:
                    line.held.append(chunk)
                    data = b"".join(line.held)
                    line = _Unfinished()
                # journalctl's short output without -a shows a message that is not clean text as a placeholder
                # ("[100B blob data]"): the server's words are not in this log. A line is counted once it ends.
                blobs = data.count(_BLOB_LINE_END)
                if blobs:
                    self.warnings["journal_blob_data"] += blobs
                parts = data.split(b"\n")
                line.add(parts.pop())
                batch, offset = self._records(parts, offset)
                self._clock(t0, c0)
                if is_current:
                    self.position["offset"] = offset
                yield batch
            if final and line.size:  # a finished file's last line, without a newline
                if line.skipping:
                    self.refuse({"offset": offset}, line.size - line.cr)
                    batch, offset = [], offset + line.size
                else:
                    data = b"".join(line.held)
                    if data.endswith(_BLOB_LINE_END[:-1]):
                        self.warnings["journal_blob_data"] += 1
                    batch, offset = self._records([data], offset, last=True)
                if is_current:
                    self.position["offset"] = offset
                yield batch

    def _records(self, parts: list[bytes], offset: int, last: bool = False):
        """Records of complete lines starting at byte ``offset``; returns them and the byte after them."""
        out = []
        for line in parts:
            start = offset
            offset += len(line) + (0 if last else 1)
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > MAX_LINE_BYTES:  # held while it was read (at most the limit and a chunk): not stored
                self.refuse({"offset": start}, len(line))
                continue
            if self.journal_json:
                rec = json_line_record(line, self._fmt, self.warnings)
                if rec is not None:
                    if rec[5] is None:  # its message too long (journal.py): cannot be, the line is longer
                        self.refuse({"offset": start}, rec[4])
                    else:
                        out.append(rec[:4] + (start,) + rec[5:])
                continue
            try:
                raw, raw_bytes = line.decode("utf-8"), None
            except UnicodeDecodeError:
                raw, raw_bytes = line.decode("utf-8", errors="replace"), line
                self.warnings["non_utf8"] += 1
            out.append((None, None, None, None, start, raw, raw_bytes))
        return out, offset


class _Unfinished:
    """The line read so far without its newline: its pieces while it may be stored, then only its length.

    Once it is longer than MAX_LINE_BYTES (+ 1: the carriage return of a
    CRLF line of the limit's length) its pieces are let go and only counted:
    it will be refused however long it gets. ``cr``: its last byte so far is
    a carriage return, which belongs to the line ending, not to its length.
    """

    __slots__ = ("held", "size", "skipping", "cr")

    def __init__(self):
        self.held: list[bytes] = []
        self.size = 0
        self.skipping = False
        self.cr = False

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.size += len(piece)
        self.cr = piece[-1] == 13
        if not self.skipping:
            self.held.append(piece)
            if self.size > MAX_LINE_BYTES + 1:
                self.held, self.skipping = [], True


def _head(path: Path, n: int) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).hex()
    except OSError:
        return ""


def file_identity(path: Path) -> str:
    """The name a file source is stored under: its absolute path."""
    return os.path.abspath(path)
