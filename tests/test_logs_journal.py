"""The journal path with real journal files written by systemd-journal-remote.

The messages are the recorded router log of this project's llama-server
(tests/fixtures/logs/router-interleaved.log), logged as the unit
llama-server.service under one PID, as journald would receive them.
Needs the Debian package systemd-journal-remote (and journalctl).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cardproof.daemon.logs import capture_journal, import_path, load_summaries
from cardproof.daemon.logs.sources import JournalReader
from cardproof.daemon.store import open_store
from logs_helpers import JOURNAL_REMOTE, write_journal

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "router-interleaved.log"
UNIT = "llama-server.service"

@pytest.fixture(autouse=True)
def _tools():
    for tool in (JOURNAL_REMOTE, "/usr/bin/journalctl"):
        if not os.path.exists(tool):
            pytest.fail(f"{tool} is required for these tests (apt-get install systemd-journal-remote)")


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


def fixture_entries(pid: int = 4242) -> list[tuple]:
    return [(line, pid, UNIT) for line in FIXTURE.read_text().splitlines()]


def stored(store):
    return store.db.execute(
        "select l.raw, l.raw_bytes, l.pid, l.unit, l.cursor, l.ts, d.model_name, l.attribution "
        "from log_lines l left join loads d on d.id = l.load_id order by l.id").fetchall()


@pytest.mark.parametrize("output", ["export", "json"])
def test_journal_file_attributed_like_the_plain_log(store, tmp_path, output):
    journal = tmp_path / "j.journal"
    write_journal(journal, fixture_entries())
    stats = import_path(store, journal, journal_output=output)
    assert stats["kind"] == "journal-file" and stats["lines"] == len(FIXTURE.read_text().splitlines())
    plain = open_store(tmp_path / "plain.db")
    import_path(plain, FIXTURE)
    from_plain = [(r[0], r[6], r[7]) for r in stored(plain)]
    plain.close()
    got = stored(store)
    assert [(r[0], r[6], r[7]) for r in got] == from_plain
    assert {r[2] for r in got} == {4242} and {r[3] for r in got} == {UNIT}
    assert all(r[4].startswith("s=") for r in got) and len({r[4] for r in got}) == len(got)
    assert got[0][5] == "2023-11-14T22:13:20.000000+00:00"


@pytest.mark.parametrize("output", ["export", "json"])
def test_message_as_bytes_ansi_and_not_utf8(store, tmp_path, output):
    journal = tmp_path / "bin.journal"
    raw = b"\x1b[34m0.00.040.287\x1b[0m I sched_reserve:        CPU compute buffer size =    18.27 MiB \xff\xfe"
    write_journal(journal, [(b"[40201] " + raw, 7, UNIT), ("plain text", 7, UNIT)])
    # journalctl hands this message over as a byte array in JSON: the case being tested
    first = subprocess.run(["journalctl", "--file", str(journal), "-o", "json"], capture_output=True, check=True)
    assert isinstance(json.loads(first.stdout.splitlines()[0])["MESSAGE"], list)
    reader = JournalReader(journal_file=journal, output=output)
    records = [r for batch in reader.batches() for r in batch]
    assert records[0][6] == b"[40201] " + raw  # the exact bytes are kept
    assert records[0][5] == (b"[40201] " + raw).decode("utf-8", "replace")
    assert records[1][5] == "plain text" and records[1][6] is None
    stats = import_path(store, journal)
    assert stats["warnings"] == {"non_utf8": 1}
    row = store.db.execute("select raw_bytes, port from log_lines order by id limit 1").fetchone()
    assert row == (b"[40201] " + raw, 40201)
    assert store.db.execute("select device, value_num from facts").fetchall() == [("CPU", 18.27)]


def test_cursor_resume_loses_and_repeats_nothing(store, tmp_path):
    journal = tmp_path / "grow.journal"
    entries = fixture_entries()
    write_journal(journal, entries[:300])
    first = import_path(store, journal)
    write_journal(journal, entries[300:], t0_us=1_800_000_000_000_000)  # the journal grows
    second = import_path(store, journal)
    third = import_path(store, journal)
    assert (first["lines"], second["lines"], third["lines"]) == (300, len(entries) - 300, 0)
    got = stored(store)
    assert [r[0] for r in got] == [e[0] for e in entries]
    assert len({r[4] for r in got}) == len(entries)
    assert store.db.execute("select count(*) from capture_gaps").fetchone()[0] == 0
    # attribution continued across the two imports exactly as in one
    once = open_store(tmp_path / "once.db")
    import_path(once, FIXTURE)
    assert [(r[0], r[6]) for r in got] == [(r[0], r[6]) for r in stored(once)]
    once.close()


def test_cursor_gone_is_a_gap_not_a_silent_skip(store, tmp_path):
    journal = tmp_path / "rot.journal"
    entries = fixture_entries()
    write_journal(journal, entries[:100])
    import_path(store, journal)
    journal.unlink()  # rotated and vacuumed: a new journal file at the same place
    write_journal(journal, entries[:100] + entries[100:200])
    stats = import_path(store, journal)
    gaps = store.db.execute("select reason, lines_skipped from capture_gaps").fetchall()
    assert len(gaps) == 1 and "cursor not found" in gaps[0][0]
    assert stats["gaps"] == 1
    # the new file's copies of the first 100 lines have new cursors: they are stored again, not lost
    assert store.db.execute("select count(*) from log_lines").fetchone()[0] == 300


def test_unit_filter_on_a_journal_file(store, tmp_path):
    journal = tmp_path / "two.journal"
    write_journal(journal, [("load_tensors: offloaded 81/81 layers to GPU", 10, "ollama.service"),
                            ("[1] something", 11, UNIT), ("hello", 10, "ollama.service")])
    stats = capture_journal(store, "ollama.service", journal_file=journal)
    assert stats["lines"] == 2
    assert {r[3] for r in stored(store)} == {"ollama.service"}


def test_single_model_server_under_systemd_attributed_by_pid(store, tmp_path):
    """Two processes of a single-model llama-server (a restart), told apart by _PID alone."""
    fx = FIXTURE.read_text().splitlines()
    b = [t.split("] ", 1)[1] for t in fx if t.startswith("[45707] ")]
    a = [t.split("] ", 1)[1] for t in fx if t.startswith("[54611] ")]
    journal = tmp_path / "pid.journal"
    # interleave the two processes line by line: only the PID can tell them apart
    mixed = [x for pair in zip([(t, 100, UNIT) for t in b], [(t, 200, UNIT) for t in a]) for x in pair]
    write_journal(journal, mixed)
    import_path(store, journal)
    loads = {ld["pid"]: ld for ld in load_summaries(store.db)}
    assert loads[100]["model"] == "tiny-b.gguf" and loads[200]["model"] == "tiny-a.gguf"
    assert loads[100]["facts"]["spec_type"] == "none" and loads[200]["facts"]["spec_type"] == "draft-simple"
    for raw, _, pid, *_rest, model, how in stored(store):
        assert how == "pid" and model == ("tiny-b.gguf" if pid == 100 else "tiny-a.gguf")


def test_two_servers_under_one_pid_stop_attribution(store, tmp_path):
    """A proxy (llama-swap) writing two servers' output under its own PID is not one
    process: after the second server starts, nothing in that stream is attributed."""
    fx = FIXTURE.read_text().splitlines()
    b = [t.split("] ", 1)[1] for t in fx if t.startswith("[45707] ")]
    a = [t.split("] ", 1)[1] for t in fx if t.startswith("[54611] ")]
    journal = tmp_path / "proxy.journal"
    write_journal(journal, [(t, 300, "llama-swap.service") for t in b + a])
    import_path(store, journal)
    got = [r[6] for r in stored(store)]
    assert got[: len(b)] == ["tiny-b.gguf"] * len(b)
    assert got[len(b):] == [None] * len(a)
