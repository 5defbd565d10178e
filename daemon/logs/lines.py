"""One log line, as read and as parsed: raw text kept, a clean view derived.

The raw text is stored unchanged (principle: a log line is evidence and is
never rewritten). Parsers and attribution look at a derived view: ANSI
colours removed, the router's ``[port]`` prefix split off, and one container
or collector prefix split off with its timestamp kept (see :func:`split_prefix`).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

#: Longest line stored (its bytes without the line ending; a journal entry's
#: MESSAGE). A line up to this is stored whole: a line is evidence and a cut
#: one would say something the server never wrote. A longer one (a binary file
#: without newlines, a dumped blob) is refused: not stored, counted and named
#: by where it is and its length (``Reader.refuse``), and skipped while read,
#: never held whole. 32 MiB keeps the longest row, its copies while it is
#: parsed and stored and SQLite's limit (1 GB) far apart.
MAX_LINE_BYTES = 32 << 20


class Refusing(list):
    """A batch of journal records that holds refused entries as well.

    A refused entry is ``(ts, unit, pid, cursor, length, None, None)``: no
    text, its message's length where a file line's offset goes. The journal
    reader names them, moves its cursor past them and stores the rest; a
    batch without refusals stays a plain list, so the common case costs one
    type check per batch.
    """

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# journalctl's default text output: "Jun 06 11:17:05 host ollama[243665]: ...", also in other
# locales ("6月 26 04:34:00 host ollama[1073]: ") and from processes without a PID ("host kernel: ")
# (journalctl leaves the host out when an entry has no _HOSTNAME)
# (-o short-precise adds microseconds to the clock)
_SYSLOG_PREFIX = re.compile(r"(?:[A-Z][a-z]{2}|\d{1,2}月) [ \d]?\d \d\d:\d\d:\d\d(?:\.\d{1,9})? "
                            r"(?:[^\s:\[]+ )?([^\s\[:]+)(?:\[(\d{1,7})\])?: ")
# journalctl -o short-full: "Sun 2025-11-30 11:53:20 CET host llama-server[1234]: " (the zone as abbreviated)
_FULL_SYSLOG_PREFIX = re.compile(r"[A-Z][a-z]{2} (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,9}))? ([A-Za-z][\w+-]{0,9}) "
                                 r"(?:[^\s:\[]+ )?([^\s\[:]+)(?:\[(\d{1,7})\])?: ")
# journalctl -o short-monotonic / short-delta: "[  123.456789] host ident[pid]: ", "[  123.456790 <    0.000001 >] "
# (seconds since boot: no wall clock to keep)
_MONOTONIC_PREFIX = re.compile(r"\[ *\d+\.\d{6}(?: <[ \d.]+>)? *\] (?:[^\s:\[]+ )?([^\s\[:]+)(?:\[(\d{1,7})\])?: ")
# journalctl -o short-unix: "1764500000.123456 host ident[pid]: " (seconds since the epoch, UTC)
_UNIX_PREFIX = re.compile(r"(\d{9,11})\.(\d{6}) (?:[^\s:\[]+ )?([^\s\[:]+)(?:\[(\d{1,7})\])?: ")
# zone abbreviations that name UTC itself; any other ("CET", "IST") is ambiguous: the clock is kept without a zone
_UTC_NAMES = frozenset(("UTC", "GMT", "Z", "UCT"))
# journalctl -o short-iso / short-iso-precise: "2025-11-30T12:00:01+0100 host llama-server[812]: "
# (the [pid] is required here: without it "system info: ..." after a stamp would read as host+ident)
_ISO_SYSLOG_PREFIX = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)? "
                                r"(?:[^\s:\[]+ )?([^\s\[:]+)\[(\d{1,7})\]: ")
# docker logs -t, kubectl logs --timestamps, podman logs -t: RFC 3339 with nanoseconds, then a space;
# log viewers that export "2026-05-17 10:44:45.483 | " put a bar after it
_STAMP_PREFIX = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?(?: \| | )")
# docker compose logs: the service name padded to the longest one, " | ", then the line
# (with -t the RFC 3339 stamp follows the bar)
_COMPOSE_PREFIX = re.compile(r"([A-Za-z0-9][\w.-]{0,62}) +\| ")
# llama.cpp's own timestamp: minutes.seconds.milliseconds.microseconds since the
# process started its logger (common/log.cpp), then a level letter
_LLAMA_TS = re.compile(r"(\d+)\.(\d\d)\.(\d\d\d)\.(\d\d\d) [A-Z] ")


def decode(data: bytes) -> tuple[str, bytes | None]:
    """Text for the ``raw`` column and, when the bytes are not valid UTF-8, the bytes."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), data


def clean(raw: str) -> tuple[int | None, int | None, str]:
    """``(port, pid, text)``: the router child's port, a syslog PID, the text without colours or prefix.

    Only the view is cleaned; the stored ``raw`` keeps colour codes and prefixes.
    """
    return clean_stamped(raw)[:3]


def clean_stamped(raw: str) -> tuple[int | None, int | None, str, str | None, str | None]:
    """``(port, pid, text, stamp, stream)``: :func:`clean`, and what a stripped prefix said.

    ``stamp`` is ISO 8601 -- in UTC (``+00:00``) when the prefix named its
    zone, without a zone when it did not (kept as the line's own clock, never
    converted by a guess) -- or None (no prefix, a prefix without a date such
    as journald's ``Nov 30 12:00:01``, or an impossible date). ``stream`` is
    the writer a prefix names when it gives no PID: a compose service, a
    journald identifier such as ``kernel``. Lines of different writers are
    different processes even when they share one file.
    """
    text = _ANSI.sub("", raw) if "\x1b" in raw else raw
    first = text[:1]
    if first == "[":  # the common case first: a router child's line (inlined: it is most lines of a router)
        end = text.find("] ", 1, 8)
        if end > 4 and text[1:end].isdigit() and int(text[1:end]) <= 65535:
            return int(text[1:end]), None, text[end + 2:], None, None
        m = _MONOTONIC_PREFIX.match(text) if text[1:2] in _MONO_SECOND else None
        if m is None:
            return None, None, text, None, None
        text = text[m.end():]
        port, text = _port_split(text) if text[:1] == "[" else (None, text)
        return port, (int(m[2]) if m[2] else None), text, None, m[1]
    if "\x00" in text:
        text = text.replace("\x00", "")
    pid = stamp = stream = rest = None
    if first.isdigit():
        if text[4:5] == "-":  # a date: cheap test before any pattern (llama.cpp's "0.00.002.814" is not)
            m = _ISO_SYSLOG_PREFIX.match(text)
            if m:
                pid, stream, stamp, rest = int(m[6]), m[5], STAMPS(m[1], m[2], m[3], m[4]), text[m.end():]
            else:
                m = _STAMP_PREFIX.match(text)
                if m:
                    stamp, rest = STAMPS(m[1], m[2], m[3], m[4]), text[m.end():]
        elif "月" in text[:3]:  # journald in a locale whose months are numbers
            m = _SYSLOG_PREFIX.match(text)
            if m:
                pid, stream, rest = (int(m[2]) if m[2] else None), m[1], text[m.end():]
        elif text[9:12].find(".") >= 0:  # short-unix: "1764500000.123456 "
            m = _UNIX_PREFIX.match(text)
            if m:
                pid, stream, rest = (int(m[4]) if m[4] else None), m[3], text[m.end():]
                stamp = _unix_stamp(int(m[1]), m[2])
    elif first.isupper() and ": " in text:
        m = _SYSLOG_PREFIX.match(text)
        if m:
            pid, stream, rest = (int(m[2]) if m[2] else None), m[1], text[m.end():]
        elif text[3:4] == " " and text[8:9] == "-":  # short-full: "Sun 2025-11-30 11:53:20 CET "
            m = _FULL_SYSLOG_PREFIX.match(text)
            if m:
                pid, stream, rest = (int(m[6]) if m[6] else None), m[5], text[m.end():]
                stamp = STAMPS(m[1], m[2], m[3], "Z" if m[4] in _UTC_NAMES else None)
    if rest is None and text.find(" | ", 0, 80) >= 0:  # find: no copy of the line
        m = _COMPOSE_PREFIX.match(text)
        if m:
            stream, rest = m[1], text[m.end():]
            if rest[4:5] == "-":  # docker compose logs -t: the stamp follows the bar
                s = _STAMP_PREFIX.match(rest)
                if s:
                    stamp, rest = STAMPS(s[1], s[2], s[3], s[4]), rest[s.end():]
    if rest is not None:
        text = rest
    if text[:1] == "[":  # a router child's line inside a container or journal prefix
        port, text = _port_split(text)
        return port, pid, text, stamp, stream
    return None, pid, text, stamp, stream


_MONO_SECOND = frozenset(" 0123456789")


def _unix_stamp(seconds: int, micro: str) -> str | None:
    """short-unix's epoch seconds as the store's ISO form (UTC)."""
    try:
        t = datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return STAMPS(t.strftime("%Y-%m-%d"), t.strftime("%H:%M:%S"), micro, "Z")


def _port_split(text: str) -> tuple[int | None, str]:
    """``[54611] rest`` -> ``(54611, "rest")``: a router child's port (1024-65535, where a router puts its
    children); ``[1] 4242``, a shell's job notice, is no port."""
    end = text.find("] ", 1, 8)
    if end > 4 and text[1:end].isdigit() and int(text[1:end]) <= 65535:
        return int(text[1:end]), text[end + 2:]
    return None, text


class _Stamps:
    """Prefix timestamps to the store's ISO form, the date part parsed once per second.

    A prefix is printed on every line of a container log; parsing each one
    with ``datetime`` would cost more than the rest of the line's handling.
    """

    def __init__(self):
        self._cache: dict[tuple, str | None] = {}

    def __call__(self, date: str, clock: str, fraction: str | None, zone: str | None) -> str | None:
        key = (date, clock, zone)
        head = self._cache.get(key, False)
        if head is False:
            head = self._head(date, clock, zone)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = head
        if head is None:
            return None
        micro = (fraction or "")[:6].ljust(6, "0")
        return f"{head[0]}.{micro}{head[1]}"

    @staticmethod
    def _head(date: str, clock: str, zone: str | None):
        # isoformat, not strftime: "%Y" drops the zeros of a year before 1000 ("1-01-01")
        try:
            if zone is None:
                return datetime.fromisoformat(f"{date}T{clock}").isoformat(timespec="seconds"), ""
            if zone != "Z" and ":" not in zone:
                zone = zone[:3] + ":" + zone[3:]
            stamp = datetime.fromisoformat(f"{date}T{clock}{'+00:00' if zone == 'Z' else zone}")
            utc = stamp.astimezone(timezone.utc).replace(tzinfo=None)
            return utc.isoformat(timespec="seconds"), "+00:00"
        except (ValueError, OverflowError):  # "2026-13-45", or 0001-01-01 east of UTC: raw line kept, no stamp
            return None


STAMPS = _Stamps()


def relative_seconds(text: str) -> float | None:
    """Seconds since process start from a llama.cpp timestamp at the start of ``text``."""
    m = _LLAMA_TS.match(text)
    if not m:
        return None
    minutes, seconds, ms, us = (int(g) for g in m.groups())
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


class RealtimeFormatter:
    """Journal ``__REALTIME_TIMESTAMP`` (µs) to the store's ISO format, cached per second.

    datetime formatting costs more than the rest of a line's handling; log
    lines come many per second, so the date part is reused.
    """

    def __init__(self):
        self._second = None
        self._prefix = ""
        self._head = None  # the digits before the microseconds that self._prefix was made from

    def __call__(self, usec: int | str | bytes | None) -> str | None:
        if usec is None:
            return None
        # journalctl's export format hands over the digits as bytes: within one second only the
        # last six change, so they are copied as they are instead of converting the number
        if type(usec) is bytes and len(usec) > 6 and usec.isdigit():
            head = usec[:-6]
            if head == self._head or self._set_second(head):
                return f"{self._prefix}.{usec[-6:].decode()}+00:00"
            return None
        try:
            usec = int(usec)
        except (TypeError, ValueError):
            return None
        second, micro = divmod(usec, 1_000_000)
        if second != self._second:
            try:
                stamp = datetime.fromtimestamp(second, timezone.utc)
            except (OverflowError, OSError, ValueError):
                return None
            self._second = second
            self._prefix = stamp.strftime("%Y-%m-%dT%H:%M:%S")
            self._head = None
        return f"{self._prefix}.{micro:06d}+00:00"

    def _set_second(self, head: bytes) -> bool:
        """Make ``head`` (seconds since the epoch, as digits) the cached second; False if it is no date."""
        second = int(head)
        if second != self._second:
            try:
                stamp = datetime.fromtimestamp(second, timezone.utc)
            except (OverflowError, OSError, ValueError):
                return False
            self._second = second
            self._prefix = stamp.strftime("%Y-%m-%dT%H:%M:%S")
        self._head = head
        return True
