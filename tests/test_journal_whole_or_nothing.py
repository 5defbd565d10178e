"""``logs import`` of a journal file stores all of it or nothing.

Real parts: journal files written by systemd-journal-remote, read by the real
journalctl, through the real CLI into a real SQLite store (Debian packages
systemd-journal-remote and systemd). The damage is made by overwriting part
of a real file, as a bad disk or a cut copy would.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from logs_helpers import JOURNAL_REMOTE, write_journal

UNIT = "llama-server.service"


def _counts(db: Path) -> dict:
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
    out = {t: conn.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}
    conn.close()
    return out


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def journal_tools():
    for tool in (JOURNAL_REMOTE, "/usr/bin/journalctl"):
        if not os.path.exists(tool):
            pytest.fail(f"{tool} is required for these tests (apt-get install systemd-journal-remote)")


def _entries(n: int, start: int = 0) -> list[tuple]:
    return [(f"srv  log_server_r: line {i} " + "x" * 200, 4242, UNIT) for i in range(start, start + n)]


def _damage_second_half(path: Path) -> None:
    """Keep the header and the first half, overwrite the rest with noise (as a bad disk or a cut copy would)."""
    data = path.read_bytes()
    half = len(data) // 2
    path.write_bytes(data[:half] + bytes((i * 7 + 13) % 251 for i in range(len(data) - half)))


@pytest.mark.parametrize("content", ["garbage", "text", "empty", "header-only"])
def test_journal_file_of_garbage_fails_and_writes_nothing(tmp_path, journal_tools, content):
    path = tmp_path / f"{content}.journal"
    path.write_bytes({"garbage": os.urandom(100_000), "text": b"hello\nworld\n", "empty": b"",
                      "header-only": b"LPKSHHRH" + b"\0" * 40}[content])
    db = tmp_path / "j.db"
    open_store(db).close()
    before = _counts(db)
    res = _invoke("logs", "import", path, "--format", "journal-file", "--db", db)
    assert res.exit_code == 1, res.output
    assert len(res.stderr.splitlines()) == 1 and str(path) in res.stderr
    assert _counts(db) == before


def test_half_good_journal_file_stores_nothing(tmp_path, journal_tools):
    """journalctl reads a damaged file as far as it can and exits 0: the header's count exposes it."""
    path = tmp_path / "half.journal"
    write_journal(path, _entries(3000))
    _damage_second_half(path)
    db = tmp_path / "j.db"
    open_store(db).close()
    before = _counts(db)
    for fmt in ("journal-file", "auto"):
        res = _invoke("logs", "import", path, "--format", fmt, "--db", db)
        assert res.exit_code == 1, res.output
        line, = res.stderr.splitlines()
        assert "journal file damaged" in line and "of the 3,000 entries" in line and "nothing imported" in line
        assert _counts(db) == before


def test_resumed_import_of_a_file_damaged_since_stores_nothing_new(tmp_path, journal_tools):
    path = tmp_path / "grow.journal"
    write_journal(path, _entries(300))
    db = tmp_path / "j.db"
    assert _invoke("logs", "import", path, "--db", db).exit_code == 0
    before = _counts(db)
    cursor = sqlite3.connect(db).execute("select cursor from log_sources").fetchone()[0]
    write_journal(path, _entries(2700, 300), t0_us=1_800_000_000_000_000)  # it grew ...
    _damage_second_half(path)  # ... and was damaged after the part already imported
    res = _invoke("logs", "import", path, "--db", db)
    assert res.exit_code == 1 and "journal file damaged: journalctl stopped at entry" in res.stderr, res.output
    assert _counts(db) == before
    assert sqlite3.connect(db).execute("select cursor from log_sources").fetchone()[0] == cursor


def test_good_journal_file_still_imports_whole(tmp_path, journal_tools):
    path = tmp_path / "good.journal"
    write_journal(path, _entries(3000))
    db = tmp_path / "j.db"
    res = _invoke("logs", "import", path, "--db", db)
    assert res.exit_code == 0, res.output
    assert _counts(db)["log_lines"] == 3000
