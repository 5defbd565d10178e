"""journalctl's export format (``-o export``) split into the importer's records.

Each entry is its fields, one per line, and an empty line. A text field is
``NAME=value``; a field whose value is not clean text (colours, newlines,
invalid UTF-8) is its name alone on a line, then the value's length as 64
bits little-endian, the value and a newline. journalctl writes ``__CURSOR``
first and ``__REALTIME_TIMESTAMP`` second.
"""

from __future__ import annotations

import re
from collections import Counter

from .lines import MAX_LINE_BYTES, RealtimeFormatter, Refusing

# a line without "=" (a binary field's name, or bytes inside its data): that entry is read field by field
_NO_EQUALS = re.compile(rb"\n[^=\n]+\n")


def export_entries(buf: bytes, fmt: RealtimeFormatter, warnings: Counter):
    """Complete entries of journalctl's export format; the unfinished rest is returned.

    A text field is ``NAME=value`` on one line; only the five fields a
    record needs are looked up (``rfind``: a field given twice keeps its
    last value), so an entry's twenty other fields cost nothing. An entry
    with a line without ``=`` -- a binary field's name, then its length --
    is read field by field. An entry whose MESSAGE is longer than
    MAX_LINE_BYTES is a refused record in a :class:`~.lines.Refusing` batch.
    """
    out = []
    append = out.append
    n = len(buf)
    find, rfind = buf.find, buf.rfind
    odd = [m.start() for m in _NO_EQUALS.finditer(buf)]  # where a line without "=" begins (or binary data)
    oi, n_odd = 0, len(odd)
    # the first entry is read field by field: no newline precedes its first field in ``buf``, and
    # journalctl writes __CURSOR first but another tool's or a hand-made export need not. After it,
    # the newline that ended the last entry stands before ``pos``: a lookup from ``lo = pos - 1``
    # finds an entry's first field as any other
    next_odd = -1
    pos = 0
    while True:
        end = find(b"\n\n", pos)
        if end < 0:
            return out, buf[pos:]
        if next_odd < end:  # a binary field in this entry: field by field
            entry, pos = _entry_slow(buf, pos, n)
            if entry is None:
                return out, buf[pos:]
            while oi < n_odd and odd[oi] < pos - 1:  # the newline before the next entry may mark it
                oi += 1
            next_odd = odd[oi] if oi < n_odd else n
            rec = _record(entry, fmt, warnings)
            if rec is not None:
                if rec[5] is None and type(out) is list:
                    out = Refusing(out)
                    append = out.append
                append(rec)
            continue
        lo = pos - 1
        m = rfind(b"\nMESSAGE=", lo, end)
        if m < 0:
            warnings["no_message"] += 1
            pos = end + 2
            continue
        e = find(b"\n", m + 9, end)
        msg = buf[m + 9:end if e < 0 else e]
        size = None  # a refused message's length, where a file line's offset goes
        if len(msg) > MAX_LINE_BYTES:
            size, raw, raw_bytes = len(msg), None, None
            if type(out) is list:
                out = Refusing(out)
                append = out.append
        else:
            try:
                raw, raw_bytes = msg.decode("utf-8"), None
            except UnicodeDecodeError:
                raw, raw_bytes = msg.decode("utf-8", errors="replace"), msg
                warnings["non_utf8"] += 1
        value = _field(buf, b"\n_PID=", lo, end)
        pid = int(value) if value is not None and value.isdigit() else None
        unit = _field(buf, b"\n_SYSTEMD_UNIT=", lo, end) or _field(buf, b"\nSYSLOG_IDENTIFIER=", lo, end)
        cursor, ts = _cursor_and_time(buf, pos, lo, end)
        append((fmt(ts), unit.decode("utf-8", "replace") if unit else None, pid, cursor, size, raw, raw_bytes))
        pos = end + 2


def _field(buf: bytes, name: bytes, lo: int, end: int) -> bytes | None:
    """The value of the entry's last field ``name`` (``b"\\n_PID="``, newline first) in ``buf[lo:end]``."""
    f = buf.rfind(name, lo, end)
    if f < 0:
        return None
    start = f + len(name)
    e = buf.find(b"\n", start, end)
    return buf[start:end if e < 0 else e]


def _cursor_and_time(buf: bytes, pos: int, lo: int, end: int) -> tuple[str | None, bytes | None]:
    """The entry's ``__CURSOR`` and ``__REALTIME_TIMESTAMP``. journalctl writes them first and second: read
    them where they are (an rfind walks back over the whole entry); anywhere else, look them up."""
    ts = cursor = None
    if buf.startswith(b"__CURSOR=", pos):
        e = buf.find(b"\n", pos + 9, end)
        cursor = buf[pos + 9:end if e < 0 else e].decode("ascii", "replace")
        if e >= 0 and buf.startswith(b"__REALTIME_TIMESTAMP=", e + 1):
            f = buf.find(b"\n", e + 22, end)
            ts = buf[e + 22:end if f < 0 else f]
    else:
        value = _field(buf, b"\n__CURSOR=", lo, end)
        cursor = value.decode("ascii", "replace") if value is not None else None
    if ts is None:
        ts = _field(buf, b"\n__REALTIME_TIMESTAMP=", lo, end)
    return cursor, ts


def _entry_slow(buf: bytes, pos: int, n: int):
    """One entry read field by field from ``pos``: ``(fields, next_pos)`` or ``(None, pos)`` if incomplete."""
    start = pos
    cur: dict = {}
    while True:
        nl = buf.find(b"\n", pos)
        if nl < 0:
            return None, start
        if nl == pos:  # an empty line ends the entry
            return cur, nl + 1
        eq = buf.find(b"=", pos, nl)
        if eq >= 0:
            cur[buf[pos:eq]] = buf[eq + 1:nl]
            pos = nl + 1
        else:  # binary-safe field: name, newline, little-endian 64-bit size, data, newline
            if nl + 9 > n:
                return None, start
            end = nl + 9 + int.from_bytes(buf[nl + 1:nl + 9], "little")
            if end >= n:
                return None, start
            cur[buf[pos:nl]] = buf[nl + 9:end]
            pos = end + 1


def _record(fields: dict, fmt: RealtimeFormatter, warnings: Counter):
    msg = fields.get(b"MESSAGE")
    if msg is None:
        warnings["no_message"] += 1
        return None
    size = None
    if len(msg) > MAX_LINE_BYTES:  # refused: its length instead of its text
        size, raw, raw_bytes = len(msg), None, None
    else:
        try:
            raw, raw_bytes = msg.decode("utf-8"), None
        except UnicodeDecodeError:
            raw, raw_bytes = msg.decode("utf-8", errors="replace"), msg
            warnings["non_utf8"] += 1
    pid = fields.get(b"_PID")
    unit = fields.get(b"_SYSTEMD_UNIT") or fields.get(b"SYSLOG_IDENTIFIER")
    cursor = fields.get(b"__CURSOR")
    return (fmt(fields.get(b"__REALTIME_TIMESTAMP")), unit.decode("utf-8", "replace") if unit else None,
            int(pid) if pid and pid.isdigit() else None, cursor.decode("ascii", "replace") if cursor else None,
            size, raw, raw_bytes)
