"""One log line, as read and as parsed: raw text kept, a clean view derived.

The raw text is stored unchanged (principle: a log line is evidence and is
never rewritten). Parsers and attribution look at a derived view: ANSI
colours removed, the router's ``[port]`` prefix split off, the syslog-style
``ident[pid]:`` prefix of a ``journalctl`` text export split off.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

#: Longest line stored; a binary file without newlines must not become one
#: row of hundreds of megabytes. Longer lines are cut and counted.
MAX_LINE_BYTES = 1 << 20

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# "Jun 06 11:17:05 host ollama[243665]: ..." -- journalctl's default text output
_SYSLOG_PREFIX = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s\[]+\[(\d+)\]: ")
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
    """``(port, pid, text)``: the router child's port, a syslog PID, the text without colours.

    Only the view is cleaned; the stored ``raw`` keeps the colour codes.
    """
    text = _ANSI.sub("", raw) if "\x1b" in raw else raw
    first = text[:1]
    if first == "[":  # the common case first: a router child's line
        end = text.find("] ", 1, 8)
        if end > 1 and text[1:end].isdigit():
            return int(text[1:end]), None, text[end + 2:]
        return None, None, text
    if "\x00" in text:
        text = text.replace("\x00", "")
    if first.isupper() and ": " in text:
        m = _SYSLOG_PREFIX.match(text)
        if m:
            port, _, rest = clean(text[m.end():])
            return port, int(m.group(1)), rest
    return None, None, text


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

    def __call__(self, usec: int | str | None) -> str | None:
        if usec is None:
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
        return f"{self._prefix}.{micro:06d}+00:00"
