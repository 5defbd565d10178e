"""The runner commits every sample without an fsync each, and loses none when its process is killed.

Real parts: the real llama-server (router mode, tiny models), ``cardproof
run`` in a process of its own, killed with SIGKILL, and the SQLite file read
afterwards.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text


def test_every_sample_announced_before_a_kill_is_in_the_file(llama_server, tmp_path):
    """A progress line is printed after its sample is committed: after SIGKILL each announced one is stored."""
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(llama_server.url, reps=200, max_tokens=16))
    db = tmp_path / "c.db"
    proc = subprocess.Popen([sys.executable, "-m", "cardproof.cli", "run", str(camp), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})
    announced = 0
    try:
        for line in proc.stdout:
            if re.match(r"\[\d+/200\] tiny-a short reasoning=off rep \d+/200: decode", line):
                announced += 1
                if announced == 12:
                    proc.send_signal(signal.SIGKILL)
                    break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert announced == 12
    stored = sqlite3.connect(db).execute("select count(*) from samples where error_kind is null").fetchone()[0]
    assert stored >= announced


def test_measuring_turns_off_the_fsync_per_commit_and_restores_it(llama_server, tmp_path):
    store = open_store(tmp_path / "s.db")
    before = store.db.execute("pragma synchronous").fetchone()[0]
    seen: list[int] = []

    def echo(line: str) -> None:
        if line.startswith("["):
            seen.append(store.db.execute("pragma synchronous").fetchone()[0])

    out = run_campaign(store, parse_campaign(campaign_text(llama_server.url, reps=3)), echo=echo)
    assert out.measured == 3
    assert before == 2 and seen == [1, 1, 1]  # FULL outside, NORMAL (WAL: durable through a process crash) inside
    assert store.db.execute("pragma synchronous").fetchone()[0] == 2
    assert store.db.execute("select count(*) from samples").fetchone()[0] == 3
