"""A long log line is one line: stored whole up to the limit, refused by name beyond it.

Real files, real SQLite, the real import path (``cardproof logs import``, the
daemon's ``capture_file``, journal files written by systemd-journal-remote
and read by journalctl). Every stored line is compared byte for byte with the
line the file holds, and where the next import starts is checked by what it
stores: a resume that starts late loses the first bytes of the next line.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.logs import capture_file, capture_journal, import_path
from cardproof.daemon.logs.lines import MAX_LINE_BYTES
from cardproof.daemon.logs.sources import _CHUNK_BYTES
from cardproof.daemon.store import open_store

from logs_helpers import JOURNAL_REMOTE, write_journal

MIB = 1 << 20
OVER = MAX_LINE_BYTES + 4321  # a line this long is refused


def _line(n: int, tag: bytes) -> bytes:
    """``n`` bytes of text that say where they come from: a cut or shifted copy would not compare equal."""
    unit = tag + b" " + bytes(range(0x21, 0x7f))
    return (unit * (n // len(unit) + 1))[:n]


def _expected(data: bytes, *, final: bool = True) -> list[tuple[int, bytes]]:
    """``(offset, bytes)`` of each line of ``data`` as it must be stored: without "\\n" or "\\r\\n",
    none longer than the limit; the last line without a newline only when the file is finished."""
    out, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0 and not final:
            break
        stop = len(data) if end < 0 else end
        line = data[pos:stop]
        if end >= 0 and line.endswith(b"\r"):
            line = line[:-1]
        if len(line) <= MAX_LINE_BYTES:
            out.append((pos, line))
        pos = stop + 1
    return out


def _stored(db: Path) -> list[tuple[int, bytes]]:
    store = open_store(db)
    try:
        rows = store.db.execute("select offset, raw, raw_bytes from log_lines order by id").fetchall()
    finally:
        store.close()
    return [(off, raw.encode("utf-8") if raw_bytes is None else raw_bytes) for off, raw, raw_bytes in rows]


def _gaps(db: Path) -> list[tuple[str, int]]:
    store = open_store(db)
    try:
        return store.db.execute("select reason, lines_skipped from capture_gaps order by id").fetchall()
    finally:
        store.close()


def _import(db: Path, log: Path) -> dict:
    store = open_store(db)
    try:
        return import_path(store, log)
    finally:
        store.close()


def _same(got: list[tuple[int, bytes]], want: list[tuple[int, bytes]]) -> None:
    """Every line equal, compared without printing megabytes when one is not."""
    assert [(o, len(b)) for o, b in got] == [(o, len(b)) for o, b in want]
    bad = [o for (o, b), (_, w) in zip(got, want) if b != w]
    assert bad == [], f"lines at these offsets differ from the file: {bad}"


def test_long_lines_stored_whole_the_longer_one_refused_by_name_then_appended_lines_whole(tmp_path):
    log = tmp_path / "server.log"
    db = tmp_path / "c.db"
    first = [b"first line", _line(5 * MIB, b"five-a"), b"between", _line(5 * MIB + 7, b"five-b"),
             _line(OVER, b"over"), b"after the refused one"]
    data = b"\n".join(first) + b"\n"
    log.write_bytes(data)
    refused_at = data.index(b"over ")
    res = CliRunner().invoke(cli, ["logs", "import", str(log), "--db", str(db)])
    assert res.exit_code == 0, res.output
    _same(_stored(db), _expected(data))
    # named: where it starts and how long it is; counted with the limit; never "all stored verbatim"
    assert f"refused line at byte {refused_at:,}: {OVER:,} bytes" in res.output
    assert "1 refused (longer than 32 MiB, not stored)" in res.output
    assert f"warning: 1 lines longer than 32 MiB ({MAX_LINE_BYTES:,} bytes) refused" in res.output
    assert "all stored verbatim" not in res.output
    assert "lines in no load, stored verbatim" in res.output
    assert "; and 1 line longer than 32 MiB refused, not stored" in res.output
    assert _gaps(db) == [(f"line at byte {refused_at:,} refused: {OVER:,} bytes, longer than the limit of "
                          f"{MAX_LINE_BYTES:,} bytes; not stored", 1)]

    # the writer goes on: the next import starts at the next line's first byte, nothing is refused again
    more = [b"2026-01-01T00:00:00Z appended one", _line(5 * MIB, b"five-c"), b"2026-01-01T00:00:01Z appended two"]
    with open(log, "ab") as f:
        f.write(b"\n".join(more) + b"\n")
    res = CliRunner().invoke(cli, ["logs", "import", str(log), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "refused" not in res.output and "3 new lines" in res.output
    _same(_stored(db), _expected(log.read_bytes()))
    assert len(_gaps(db)) == 1


def test_a_long_line_across_the_read_chunk_boundary_and_a_writer_still_writing_it(tmp_path):
    """A line that starts in one read chunk and ends in the next is one line; a capture that finds a
    line without its newline (the server still writing it) leaves it for the next capture whole."""
    log = tmp_path / "server.log"
    db = tmp_path / "c.db"
    head = _line(_CHUNK_BYTES - 3 * MIB // 2 - 1, b"head")  # the next line starts 1.5 MiB before the boundary
    across = _line(3 * MIB, b"across")
    data = head + b"\n" + across + b"\n" + _line(2 * MIB, b"half written")
    log.write_bytes(data)
    store = open_store(db)
    try:
        capture_file(store, log)  # the daemon's capture: the file is still being written
    finally:
        store.close()
    _same(_stored(db), _expected(data, final=False))
    with open(log, "ab") as f:
        f.write(b" and its end\nnext\n")
    store = open_store(db)
    try:
        capture_file(store, log)
    finally:
        store.close()
    _same(_stored(db), _expected(log.read_bytes()))


def test_an_unfinished_line_over_the_limit_is_refused_once_when_it_ends(tmp_path):
    """A capture that finds the start of a too-long line refuses nothing yet (its length is not known)
    and comes back to its first byte; once the line ends it is refused once, and what follows is read."""
    log = tmp_path / "server.log"
    db = tmp_path / "c.db"
    blob = _line(OVER, b"blob")
    log.write_bytes(b"before\n" + blob[:MAX_LINE_BYTES + 2 * MIB])
    store = open_store(db)
    try:
        counts = [capture_file(store, log)]
        with open(log, "ab") as f:
            f.write(blob[MAX_LINE_BYTES + 2 * MIB:] + b"\r\nafter\n")
        counts.append(capture_file(store, log))
        with open(log, "ab") as f:
            f.write(b"last\n")
        counts.append(capture_file(store, log))
    finally:
        store.close()
    assert _stored(db) == [(0, b"before"), (7 + OVER + 2, b"after"), (7 + OVER + 2 + 6, b"last")]
    assert [c.get("refused") for c in counts] == [[], [{"offset": 7, "bytes": OVER}], []]
    assert len(_gaps(db)) == 1


def test_crlf_lines_stored_whole_up_to_the_limit_without_their_line_ending(tmp_path):
    """The limit counts a line's own bytes: "\\r\\n" is the line ending, not the line."""
    log = tmp_path / "crlf.log"
    db = tmp_path / "c.db"
    lines = [b"crlf one", _line(5 * MIB, b"crlf five"), _line(MAX_LINE_BYTES, b"at the limit"),
             _line(MAX_LINE_BYTES + 1, b"one over"), b"", b"crlf last"]
    data = b"\r\n".join(lines) + b"\r\n"
    log.write_bytes(data)
    stats = _import(db, log)
    _same(_stored(db), _expected(data))
    assert stats.get("refused") == [{"offset": data.index(b"one over"), "bytes": MAX_LINE_BYTES + 1}]
    with open(log, "ab") as f:
        f.write(b"appended\r\n" + _line(5 * MIB, b"appended five") + b"\r\n")
    assert _import(db, log)["lines"] == 2
    _same(_stored(db), _expected(log.read_bytes()))


def test_a_newline_free_blob_is_skipped_without_holding_it(tmp_path):
    """A sparse file: 256 MiB of NUL bytes (eight times the limit) between two lines, no newline in
    them. Reading it holds about the limit and two chunks, whatever the blob's size; it is refused
    with its length."""
    log = tmp_path / "blob.log"
    blob = 256 * MIB
    with open(log, "wb") as f:
        f.write(b"before\n")
        f.seek(7 + blob)
        f.write(b"\nafter\n")
    store = open_store(tmp_path / "c.db")
    tracemalloc.start()
    try:
        stats = import_path(store, log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        store.close()
    assert _stored(tmp_path / "c.db") == [(0, b"before"), (7 + blob + 1, b"after")]
    assert stats.get("refused") == [{"offset": 7, "bytes": blob}]
    assert peak < MAX_LINE_BYTES + 3 * _CHUNK_BYTES, f"{peak:,} bytes held"


needs_journal_remote = pytest.mark.skipif(not os.path.exists(JOURNAL_REMOTE), reason="needs systemd-journal-remote")


@needs_journal_remote
@pytest.mark.parametrize("output", ["export", "json"])
def test_journal_messages_stored_whole_or_refused_by_cursor_and_not_again(tmp_path, output):
    journal = tmp_path / "long.journal"
    unit = "llama.service"
    five = _line(5 * MIB, b"journal five").decode()
    write_journal(journal, [("first", 9, unit), (five, 9, unit), (_line(OVER, b"journal over").decode(), 9, unit)])
    db = tmp_path / "j.db"
    store = open_store(db)
    try:
        stats = capture_journal(store, journal_file=journal, output=output)
        assert stats["lines"] == 2 and stats["warnings"] == {"too_long": 1}
        [refused] = stats["refused"]
        assert refused["bytes"] == OVER and refused["cursor"].startswith("s=")
        # the cursor moved past the refused entry: the next capture neither refuses it again nor stores it
        again = capture_journal(store, journal_file=journal, output=output)
        assert (again["lines"], again["refused"]) == (0, [])
        write_journal(journal, [("appended", 9, unit)], t0_us=1_800_000_000_000_000)
        assert capture_journal(store, journal_file=journal, output=output)["lines"] == 1
        rows = [r[0] for r in store.db.execute("select raw from log_lines order by id")]
        gaps = store.db.execute("select reason from capture_gaps").fetchall()
    finally:
        store.close()
    assert rows == ["first", five, "appended"]
    assert gaps == [(f"journal entry {refused['cursor']} refused: its message is {OVER:,} bytes, longer than "
                     f"the limit of {MAX_LINE_BYTES:,} bytes; not stored",)]


def test_journal_json_file_line_over_the_limit_is_refused_by_offset(tmp_path):
    """A ``journalctl -o json`` export read as a file: a line over the limit is refused unread."""
    export = tmp_path / "export.json"
    entry = {"__CURSOR": "s=1;i=1", "__REALTIME_TIMESTAMP": "1700000000000000", "_PID": "9"}
    lines = [json.dumps({**entry, "MESSAGE": "ok"}).encode(),
             json.dumps({**entry, "__CURSOR": "s=1;i=2", "MESSAGE": _line(5 * MIB, b"five").decode()}).encode(),
             json.dumps({**entry, "__CURSOR": "s=1;i=3", "MESSAGE": _line(OVER, b"over").decode()}).encode(),
             json.dumps({**entry, "__CURSOR": "s=1;i=4", "MESSAGE": "last"}).encode()]
    data = b"\n".join(lines) + b"\n"
    export.write_bytes(data)
    store = open_store(tmp_path / "j.db")
    try:
        stats = import_path(store, export)
        rows = store.db.execute("select cursor, raw from log_lines order by id").fetchall()
    finally:
        store.close()
    assert rows == [("s=1;i=1", "ok"), ("s=1;i=2", _line(5 * MIB, b"five").decode()), ("s=1;i=4", "last")]
    assert stats.get("refused") == [{"offset": data.index(lines[2]), "bytes": len(lines[2])}]
