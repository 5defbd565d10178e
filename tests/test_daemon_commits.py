"""A real daemon against the real llama-server: every sample it prints is in the file,
seen by another process within a few seconds of its "[k/n]" line, and a SIGKILL
after the last one loses none of them.

The daemon opens the store twice (its main loop and the campaign's worker thread);
a second open that dropped the first connection's lock let the readers' connections
delete -wal beneath it, and its commits were seen by no one and lost at the kill.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import time
from pathlib import Path

from click.testing import CliRunner

from cardproof.cli import cli
from conftest import campaign_text
from test_daemon_real import start_daemon, write_config

PRINTED = re.compile(r"^cardproof daemon: \[(\d+)/(\d+)\] ", re.M)


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(db, timeout=5)  # opened, read and closed like any other reader
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def test_every_printed_sample_is_seen_at_once_and_survives_sigkill(fresh_server, tmp_path):
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(fresh_server.url, models=("tiny-b",), classes=("short",), reps=4, max_tokens=8))
    db = tmp_path / "d.db"
    cfg = write_config(tmp_path, db)
    assert CliRunner().invoke(cli, ["queue", "add", str(camp), "--config", str(cfg)]).exit_code == 0
    log = tmp_path / "daemon-1.log"
    d = start_daemon(cfg, tmp_path, 1)
    try:
        deadline = time.monotonic() + 90
        printed = 0
        while printed < 4:
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            assert d.poll() is None, log.read_text(errors="replace")
            counts = [int(m.group(1)) for m in PRINTED.finditer(log.read_text(errors="replace"))]
            if counts and counts[-1] > printed:
                printed = counts[-1]
                seen_by = time.monotonic() + 5
                while count(db, "select count(*) from samples where error_kind is null") < printed:
                    assert time.monotonic() < seen_by, (
                        f"sample {printed} printed but not in the file after 5 s:\n" + log.read_text(errors="replace"))
                    time.sleep(0.05)
            time.sleep(0.05)
        assert count(db, "select count(*) from runs") == 1
    finally:
        d.send_signal(signal.SIGKILL)
        d.wait(10)
    assert count(db, "select count(*) from samples where error_kind is null") >= 4
    assert count(db, "select count(*) from runs") == 1
