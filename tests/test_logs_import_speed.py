"""The import's shortcuts give exactly what the plain way gives.

Real SQLite; the journal-time values are the kind journalctl's export format
hands over (digits as bytes) next to the JSON format's strings.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.logs import import_path
from cardproof.daemon.logs.access import gin_time, parse_access
from cardproof.daemon.logs.lines import RealtimeFormatter
from cardproof.daemon.store import open_store

HOSTILE_USEC = [
    "1700000000123456", "1700000000999999", "1700000001000000", "1700000000000001",  # back to an earlier second
    "0000000001700000000000001", "123", "1234567", "000000", "9999999", "-1700000000123456", "+1700000000123456",
    "99999999999999999999999", "17000000001234x6", "", "1700000000123456 ",
]


def test_export_bytes_and_json_strings_give_the_same_stamp_in_any_order():
    as_bytes, as_text = RealtimeFormatter(), RealtimeFormatter()
    for value in HOSTILE_USEC * 2 + list(reversed(HOSTILE_USEC)):
        data = value.encode()
        assert as_bytes(data) == as_text(value), value
    # a non-ASCII digit is no number in bytes (int() refuses it), as before the shortcut
    assert as_bytes("1\u0661700000000123456".encode()) is None


def test_one_formatter_fed_both_kinds_never_reuses_the_other_kinds_second():
    fmt = RealtimeFormatter()
    assert fmt(b"1700000000123456") == "2023-11-14T22:13:20.123456+00:00"
    assert fmt("1800000000000000") == "2027-01-15T08:00:00.000000+00:00"
    # the bytes' second was cached before the string moved the prefix on: it must be made again
    assert fmt(b"1700000000654321") == "2023-11-14T22:13:20.654321+00:00"


def test_gin_time_read_once_per_printed_second_keeps_dates_and_notes():
    line = '[GIN] 2025/08/07 - 18:27:18 | 200 |  1m16s |  192.168.1.5 | POST     "/api/chat"'
    bad = '[GIN] 2025/13/45 - 99:99:99 | 200 |  1m16s |  192.168.1.5 | POST     "/api/chat"'
    for _ in range(3):
        assert parse_access(line).logged_time == "2025-08-07T18:27:18"
        a = parse_access(bad)
        assert a.logged_time == "2025/13/45 - 99:99:99" and a.time_note.startswith("not a date")
    assert gin_time("2024/02/29 - 00:00:00", ("2024", "02", "29", "00", "00", "00")) == ("2024-02-29T00:00:00", None)


@pytest.mark.parametrize("cache_kib", [2000, 500])
def test_import_gives_the_connection_its_page_cache_back(tmp_path, cache_kib):
    log = tmp_path / "server.log"
    log.write_text("build: 4589 (abc) with cc\nmain: server is listening on http://127.0.0.1:8080\n")
    store = open_store(tmp_path / "s.db")
    conn = store.db.conn
    conn.execute(f"pragma cache_size = -{cache_kib}")
    import_path(store, log)
    assert conn.execute("pragma cache_size").fetchone()[0] == -cache_kib
    store.close()
