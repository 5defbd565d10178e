"""A journal pasted as journalctl's short text where some messages were not clean text.

journalctl prints such a message (bytes that are not UTF-8, control characters) as
``[100B blob data]`` unless it is run with ``-a``: ggml-org/llama.cpp issue
#10547 shows a server's ``print_timing`` block that way. The placeholder
lines are stored as they are and the import says, once, how many there are
and how to get the text. The journal is written by systemd-journal-remote
and printed by the real journalctl.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.logs import import_path
from cardproof.daemon.store import open_store
from logs_helpers import JOURNAL_REMOTE

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
pytestmark = pytest.mark.skipif(not os.path.exists(JOURNAL_REMOTE), reason="needs systemd-journal-remote")


def _entry(message: bytes, t_us: int) -> bytes:
    data = message
    head = (f"__REALTIME_TIMESTAMP={t_us}\n__MONOTONIC_TIMESTAMP={t_us % 10**9}\n"
            f"_BOOT_ID=0123456789abcdef0123456789abcdef\n_PID=4242\n_HOSTNAME=kamala\n"
            f"SYSLOG_IDENTIFIER=llama-server\n").encode()
    return head + b"MESSAGE\n" + len(data).to_bytes(8, "little") + data + b"\n\n"


def test_blob_placeholders_are_counted_and_named(tmp_path):
    # process 1 of poseidon (real); its request block's lines made unprintable for journalctl (systemd 252 shows
    # bytes that are not UTF-8 as a placeholder; older versions did the same with colour codes)
    lines = (REAL / "poseidon-rocm-then-cpu.log").read_text().splitlines()[7:61]
    coloured = [n for n, ln in enumerate(lines) if "time =" in ln]
    messages = [ln.encode() + (b" \xff" if n in coloured else b"") for n, ln in enumerate(lines) if ln]
    journal = tmp_path / "j.journal"
    data = b"".join(_entry(m, 1_733_000_000_000_000 + i * 1000) for i, m in enumerate(messages))
    subprocess.run([JOURNAL_REMOTE, "-o", str(journal), "-"], input=data, check=True, capture_output=True)
    text = subprocess.run(["journalctl", "--file", str(journal), "-o", "short", "--no-pager", "-q"],
                          check=True, capture_output=True, text=True).stdout
    pasted = tmp_path / "pasted.log"
    pasted.write_text(text)
    assert text.count(" blob data]") == len(coloured) == 3  # prompt eval, eval, total

    store = open_store(tmp_path / "t.db")
    try:
        stats = import_path(store, pasted)
        stored = store.db.execute("select count(*) from log_lines where raw like '%blob data]'").fetchone()[0]
        observed = store.db.execute("select count(*) from observed_requests").fetchone()[0]
    finally:
        store.close()
    assert stats["warnings"] == {"journal_blob_data": 3}
    assert stored == 3  # kept verbatim
    assert observed == 0  # the counters are not in the log: no request is made up
    res = CliRunner().invoke(cli, ["logs", "import", str(pasted), "--db", str(tmp_path / "cli.db")])
    assert res.exit_code == 0
    warning = [ln for ln in res.output.splitlines() if ln.startswith("warning:")]
    assert warning == ["warning: 3 lines are journalctl's '[N blob data]' placeholders, not the server's text "
                       "(stored as they are; export the journal with `journalctl -a` or `-o export` to read them)"]


def test_a_final_placeholder_without_newline_counts_once(tmp_path):
    path = tmp_path / "cut.log"
    path.write_text("Dec 02 12:10:29 kamala llama-server[24689]: [100B blob data]\n"
                    "Dec 02 12:10:29 kamala llama-server[24689]: [48B blob data]")
    store = open_store(tmp_path / "t.db")
    try:
        stats = import_path(store, path)
    finally:
        store.close()
    assert stats["warnings"] == {"journal_blob_data": 2}
