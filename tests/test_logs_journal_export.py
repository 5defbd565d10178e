"""journalctl's export format read right on entries shaped like a real journal's.

A unit's journal entries carry twenty-odd fields (host, transport, uid,
cgroup, invocation id ...), not the handful the other tests write; some
messages are binary fields (colours, newlines, invalid UTF-8), other fields
can be binary too, a field can be given twice (the last value counts, as
journalctl's JSON shows it), an entry can lack a message, ``_PID`` or
``_SYSTEMD_UNIT``. The journal file is written by systemd-journal-remote and
read back twice: by the importer (export format) and by ``journalctl -o
json`` -- journalctl's own reading is the expectation.
"""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest

from cardproof.daemon.logs import import_path
from cardproof.daemon.store import open_store
from logs_helpers import JOURNAL_REMOTE

pytestmark = pytest.mark.skipif(not os.path.exists(JOURNAL_REMOTE), reason="needs systemd-journal-remote")


def _field(name: bytes, value: bytes) -> bytes:
    if b"\n" in value or any(c < 32 and c != 9 for c in value):
        return name + b"\n" + len(value).to_bytes(8, "little") + value + b"\n"
    return name + b"=" + value + b"\n"


def _entries(n: int) -> bytes:
    rnd = random.Random(15)
    out = []
    for i in range(n):
        head = [_field(b"__REALTIME_TIMESTAMP", b"%d" % (1_764_500_000_000_000 + i * 1371)),
                _field(b"__MONOTONIC_TIMESTAMP", b"%d" % (i * 1000 + 5)),
                _field(b"_BOOT_ID", b"0123456789abcdef0123456789abcdef")]
        fields = [(b"_HOSTNAME", b"gpu-box"), (b"_TRANSPORT", b"stdout"), (b"PRIORITY", b"6"),
                  (b"SYSLOG_FACILITY", b"3"), (b"_UID", b"998"), (b"_GID", b"998"), (b"_COMM", b"llama-server"),
                  (b"_EXE", b"/usr/local/bin/llama-server"),
                  (b"_CMDLINE", b"/usr/local/bin/llama-server -m /models/q.gguf --port 8080"),
                  (b"_SYSTEMD_CGROUP", b"/system.slice/llama.service"), (b"_SYSTEMD_SLICE", b"system.slice"),
                  (b"_SYSTEMD_INVOCATION_ID", b"%032x" % (i // 700)), (b"_STREAM_ID", b"%032x" % (i // 50)),
                  (b"SYSLOG_IDENTIFIER", b"llama-server")]
        r = rnd.random()
        if r < 0.9:
            fields.append((b"_PID", b"%d" % (1000 + i // 500)))
        if r < 0.8:
            fields.append((b"_SYSTEMD_UNIT", b"llama.service"))
        elif r < 0.85:
            fields.append((b"_SYSTEMD_UNIT", b""))  # empty: the identifier names the writer
        k = rnd.random()
        if k < 0.8:
            msg = b"slot print_timing: id  0 | task %d | prompt eval time = 1.00 ms / 5 tokens" % i
        elif k < 0.85:
            msg = b"\x1b[34m0.00.017.656\x1b[0m I srv  load_model: loading model '/m/%d.gguf'" % i
        elif k < 0.9:
            msg = b"a message with\nnewlines\n\nand an empty line = %d" % i
        elif k < 0.94:
            msg = b"not UTF-8 \xff\xfe = %d" % i
        elif k < 0.97:
            msg = None  # an entry without a message
        else:
            msg = b"MESSAGE=a message that looks like a field %d" % i
        if msg is not None:
            fields.append((b"MESSAGE", msg))
            if rnd.random() < 0.03:
                fields.append((b"MESSAGE", b"the same field again %d" % i))
        if rnd.random() < 0.05:
            fields.append((b"X_BLOB", b"binary\n\nFIELD\n__CURSOR=not a cursor\n"))
        rnd.shuffle(fields)
        out.append(b"".join(head) + b"".join(_field(a, b) for a, b in fields) + b"\n")
    return b"".join(out)


def _as_json_sees_it(path) -> list[tuple]:
    proc = subprocess.run(["journalctl", "--file", str(path), "-o", "json", "-a"], capture_output=True, check=True)
    want = []
    for line in proc.stdout.splitlines():
        obj = json.loads(line)
        msg = obj.get("MESSAGE")
        if msg is None:
            continue
        if isinstance(msg, list) and msg and isinstance(msg[0], list):
            msg = msg[-1]  # given twice: the export reader keeps the last value
        elif isinstance(msg, list) and msg and isinstance(msg[0], str):
            msg = msg[-1]
        raw = bytes(msg).decode("utf-8", "replace") if isinstance(msg, list) else msg
        unit = obj.get("_SYSTEMD_UNIT") or obj.get("SYSLOG_IDENTIFIER")
        pid = int(obj["_PID"]) if obj.get("_PID") else None
        want.append((raw, unit, pid, obj["__CURSOR"]))
    return want


def test_export_reader_agrees_with_journalctls_json(tmp_path):
    journal = tmp_path / "rich.journal"
    proc = subprocess.run([JOURNAL_REMOTE, "-o", str(journal), "-"], input=_entries(6000), capture_output=True)
    assert proc.returncode == 0, proc.stderr
    want = _as_json_sees_it(journal)
    store = open_store(tmp_path / "t.db")
    try:
        stats = import_path(store, journal)
        got = store.db.execute("select raw, unit, pid, cursor from log_lines order by id").fetchall()
        bad_bytes = store.db.execute("select count(*) from log_lines where raw_bytes is not null").fetchone()[0]
    finally:
        store.close()
    assert [tuple(r) for r in got] == want
    assert stats["warnings"]["no_message"] == 6000 - len(want)
    assert bad_bytes == stats["warnings"]["non_utf8"] > 0  # invalid UTF-8 keeps its bytes


def test_cursor_and_time_are_read_where_journalctl_puts_them_and_looked_up_elsewhere():
    """journalctl writes __CURSOR first and __REALTIME_TIMESTAMP second; an entry in another order
    (hand-made export input) still gives both, and an entry without a time gives none."""
    from collections import Counter

    from cardproof.daemon.logs.export import export_entries
    from cardproof.daemon.logs.lines import RealtimeFormatter

    entries = (b"__CURSOR=s=a;i=1\n__REALTIME_TIMESTAMP=1764500000000001\n_PID=7\nMESSAGE=first\n\n"
               b"__MONOTONIC_TIMESTAMP=5\n_PID=8\n__REALTIME_TIMESTAMP=1764500001000002\nMESSAGE=second\n__CURSOR=s=a;i=2\n\n"
               b"__CURSOR=s=a;i=3\n_SYSTEMD_UNIT=x.service\nMESSAGE=third\n\n"
               b"__CURSOR=s=a;i=4\n__REALTIME_TIMESTAMP=notanumber\nMESSAGE=fourth\n\n")
    out, rest = export_entries(entries, RealtimeFormatter(), Counter())
    assert rest == b""
    assert [(r[0], r[2], r[3], r[5]) for r in out] == [
        ("2025-11-30T10:53:20.000001+00:00", 7, "s=a;i=1", "first"),
        ("2025-11-30T10:53:21.000002+00:00", 8, "s=a;i=2", "second"),
        (None, None, "s=a;i=3", "third"),
        (None, None, "s=a;i=4", "fourth"),
    ]
    assert out[2][1] == "x.service"


def test_any_field_may_come_first_in_an_entry_at_any_place_in_the_stream():
    """Hand-made or another tool's export input need not start an entry with __CURSOR: whichever field
    comes first (MESSAGE, _PID, the unit, the time, a binary field) is read as anywhere else, in the
    first entry of a read (no newline before it) and in the entries after it, and a read split at any
    byte gives the same records. The field-by-field reader is the reference."""
    import random
    from collections import Counter

    from cardproof.daemon.logs.export import _entry_slow, _record, export_entries
    from cardproof.daemon.logs.lines import RealtimeFormatter

    def binary(name: bytes, value: bytes) -> bytes:
        return name + b"\n" + len(value).to_bytes(8, "little") + value + b"\n"

    rng = random.Random(7)
    entries = []
    for i in range(300):
        fields = [b"__CURSOR=s=b;i=%d\n" % i, b"__REALTIME_TIMESTAMP=%d\n" % (1764500000000000 + i),
                  b"_PID=%d\n" % (100 + i), b"_SYSTEMD_UNIT=llama-%d.service\n" % (i % 3),
                  b"SYSLOG_IDENTIFIER=llama-server\n", b"PRIORITY=6\n"]
        fields.append(binary(b"MESSAGE", b"line %d\n\nwith a blank line" % i) if i % 5 == 0
                      else b"MESSAGE=load_tensors: offloaded %d/33 layers to GPU\n" % i)
        if i % 7 == 0:
            fields.append(binary(b"EXTRA", b"\x1b[31mred\x1b[0m\n\n"))
        rng.shuffle(fields)
        if i < 6:  # each of the looked-up fields first at least once, at the very start of a read too
            name = (b"MESSAGE", b"_PID", b"_SYSTEMD_UNIT", b"__REALTIME_TIMESTAMP", b"SYSLOG_IDENTIFIER",
                    b"EXTRA")[i]
            first = [f for f in fields if f.startswith(name + b"=") or f.startswith(name + b"\n")]
            if not first:
                first = [binary(name, b"\x00\x01")]
                fields.append(first[0])
            fields.remove(first[0])
            fields.insert(0, first[0])
        entries.append(b"".join(fields) + b"\n")
    fmt = RealtimeFormatter()
    want = []
    for e in entries:
        fields, nxt = _entry_slow(e, 0, len(e))
        assert nxt == len(e)
        want.append(_record(fields, fmt, Counter()))
    data = b"".join(entries)
    for start in range(6):  # a read that begins with entry ``start``: its first field has no newline before it
        out, rest = export_entries(b"".join(entries[start:]), fmt, Counter())
        assert rest == b"" and out == want[start:], start
    for _ in range(20):  # reads split anywhere, the rest carried into the next as the importer does
        cuts = sorted(rng.sample(range(1, len(data)), 15))
        got, pending = [], b""
        for a, b in zip([0, *cuts], [*cuts, len(data)]):
            out, pending = export_entries(pending + data[a:b], fmt, Counter())
            got += out
        assert pending == b"" and got == want
