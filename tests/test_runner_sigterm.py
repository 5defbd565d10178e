"""SIGTERM while a measured request is in flight ends the run as interrupted (real server, real process).

It used to be caught with the request's own failures: the cut request became one
more exception sample ("internal: _Interrupted: signal 15") and the run went on
into its next cells, so only SIGINT could stop it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

from conftest import campaign_text


def test_sigterm_during_a_cell_interrupts_the_run_and_stores_no_exception_for_it(llama_server, tmp_path):
    camp = tmp_path / "c.toml"
    # many long-ish answers: the runner spends nearly all its time inside a request
    camp.write_text(campaign_text(llama_server.url, models=("tiny-b",), classes=("short", "medium"),
                                  reps=200, max_tokens=96))
    db = tmp_path / "t.db"
    proc = subprocess.Popen([sys.executable, "-m", "cardproof.cli", "run", str(camp), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        deadline = time.monotonic() + 120
        seen = 0
        while time.monotonic() < deadline and seen < 5:
            time.sleep(0.05)
            try:
                seen = sqlite3.connect(db).execute("select count(*) from samples").fetchone()[0]
            except sqlite3.Error:
                seen = 0
        assert seen >= 5, "the run never got going"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err[-1000:]
    conn = sqlite3.connect(db)
    status, error = conn.execute("select status, error_text from runs").fetchone()
    assert status == "interrupted" and error == f"interrupted: signal {signal.SIGTERM.value}", (status, error)
    assert "interrupted (signal 15)" in err
    cut = conn.execute("select count(*) from samples where error_text like '%Interrupted%'").fetchone()[0]
    assert cut == 0
    # it stopped where it was: the medium cell (planned after 200 short ones) was never reached
    assert conn.execute("select count(*) from samples where error_kind is null").fetchone()[0] < 400
