"""Access-log lines -> ``requests_seen``: who asked the server for what (principle 11).

Formats, each from the server's own source:

* Ollama (gin's logger): ``[GIN] 2025/08/07 - 18:27:18 | 200 | 1m16s |
  192.168.1.5 | POST "/api/chat"`` -- the time is the server's local time;
* llama-swap (proxy/proxymanager.go): ``[INFO] Request 127.0.0.1 "POST
  /v1/chat/completions HTTP/1.1" 200 1234 "python-httpx/0.28.1" 2.1s``;
* llama-server (``log_server_r``, printed at ``-lv 4``): ``srv
  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200``.

Rows are written in the import's own transaction, so a line is counted
exactly once. Parsing is a pure function of the text; tests use real lines.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple


_GIN = re.compile(
    r"\[GIN\] (\d{4})/(\d{2})/(\d{2}) - (\d{2}):(\d{2}):(\d{2}) \|\s*(\d{3}) \|\s*(\S+) \|\s*(\S+) \|\s*"
    r"([A-Z]+)\s+\"([^\"]*)\""
)
_SWAP = re.compile(r"\bRequest (\S+) \"([A-Z]+) (\S+) [^\"]*\" (\d{3})\b")
_LLAMA = re.compile(r"log_server_r: (?:done )?request: ([A-Z]+) (\S+) (\S+) (\d{3})\b")
# older formats, still in users' logs:
# llama-swap before its [INFO] lines: [llama-swap] 192.168.16.7 [2025-01-30 18:35:15] "GET /v1/models HTTP/1.1" 200 578
_SWAP_OLD = re.compile(r"\[llama-swap\] (\S+) \[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)\] \"([A-Z]+) (\S+) [^\"]*\" (\d{3})\b")
# llama-server 2024 and ik_llama.cpp: INFO [ log_server_request] request | ... remote_addr="127.0.0.1" ...
# status=200 method="POST" path="/v1/chat/completions", and the JSON log's "remote_addr":"..." fields
_FIELD = {k: re.compile(rf'"?{k}"?[=:]"?([^",\s}}]+)') for k in ("remote_addr", "status", "method", "path")}
# the importer's one trigger scan passes these lines to parse_access (parsers/markers.py names them)


class Access(NamedTuple):
    client: str
    method: str
    path: str
    status: int
    source: str
    logged_time: str | None = None  # the line's own clock, where it has one (no time zone)
    duration: str | None = None
    time_note: str | None = None  # why ``logged_time`` is the printed text rather than a date


def gin_time(printed: str, parts: tuple[str, ...]) -> tuple[str, str | None]:
    """``(timestamp, note)`` for a GIN line's ``2025/08/07 - 18:27:18``.

    A real date becomes ``2025-08-07T18:27:18`` (the line's own clock, no
    zone) and no note. An impossible one (``2025/13/45 - 99:99:99``) is kept
    as printed, with the reason as the note: never a guessed date, never an
    error that stops the import.
    """
    hit = _GIN_TIMES.get(printed)
    if hit is None:
        try:
            hit = datetime(*(int(p) for p in parts)).isoformat(), None
        except ValueError as exc:
            hit = printed, f"not a date: {exc}"
        if len(_GIN_TIMES) >= 4096:
            _GIN_TIMES.clear()
        _GIN_TIMES[printed] = hit
    return hit


# a busy Ollama prints many requests per second: each printed second is read once
_GIN_TIMES: dict[str, tuple[str, str | None]] = {}


def parse_access(text: str) -> Access | None:
    """The request one clean log line records, or None."""
    if "[GIN]" in text:
        m = _GIN.search(text)
        if m:
            ts, note = gin_time(text[m.start(1):m.end(6)], m.groups()[:6])
            return Access(m[9], m[10], m[11], int(m[7]), "ollama-gin", ts, m[8], note)
    if "Request " in text:
        m = _SWAP.search(text)
        if m:
            return Access(m[1], m[2], m[3], int(m[4]), "llama-swap")
    if "log_server_r" in text:
        m = _LLAMA.search(text)
        if m:
            return Access(m[3], m[1], m[2], int(m[4]), "llama-server")
        if "log_server_request" in text:
            f = {k: rx.search(text) for k, rx in _FIELD.items()}
            if all(f.values()) and f["status"][1].isdigit():
                return Access(f["remote_addr"][1], f["method"][1], f["path"][1], int(f["status"][1]), "llama-server")
    if "[llama-swap]" in text:
        m = _SWAP_OLD.search(text)
        if m:
            return Access(m[1], m[4], m[5], int(m[6]), "llama-swap", f"{m[2]}T{m[3]}")
    return None


def record_requests(conn, run_id: int | None, found: list[tuple[int, str | None, Access]]) -> int:
    """Write ``requests_seen`` for the access lines an import found: ``(line_id, ts, access)``.

    ``ts`` is the line's timestamp from the journal (UTC, the store's format)
    when there is one; otherwise the time the line itself prints, which has
    no time zone and is kept as printed rather than converted by a guess
    (``ts_note`` says why, where that time is no date at all).
    """
    out = [(run_id, ts or a.logged_time, None if ts else a.time_note, a.client, a.method, a.path, a.status,
            line_id, a.source) for line_id, ts, a in found]
    if out:
        conn.executemany(
            "insert into requests_seen (run_id, ts, ts_note, client, method, path, status, line_id, source) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, ?)", out)
    return len(out)
