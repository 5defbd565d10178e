"""A run's final log capture fails or has to wait: the run keeps its status, gates and rules.

Real llama-server (router mode, tiny models), real runs, real SQLite. The
capture failure is injected by replacing the capture function (the shape
of the reported crash: an IntegrityError out of the importer); the waits
are caused by real processes: one holding the write lock, and a real
``cardproof daemon run`` capturing the same log file while a foreground
``cardproof run`` measures.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.run import record as run_record  # the final log capture, after the measurements
from conftest import campaign_text

RULE = 'fits = "decode.short >= 0"'


def write_campaign(path: Path, url: str, log: Path, reps: int = 2) -> Path:
    text = campaign_text(url, reps=reps).replace("request_timeout_s = 60",
                                                 f'request_timeout_s = 60\nlog_file = "{log}"')
    path.write_text(text + f"\n[rules]\n{RULE}\n")
    return path


def run_row(db: Path) -> dict:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("select * from runs order by id desc limit 1").fetchone())
    finally:
        conn.close()


def assert_evaluated(db: Path, run_id: int, planned: int) -> None:
    """Every measured sample went through the gates, and the rule was evaluated."""
    conn = sqlite3.connect(db)
    try:
        samples = conn.execute("select count(*) from samples where run_id = ? and kind = 'measure' "
                               "and error_kind is null", [run_id]).fetchone()[0]
        judged = conn.execute("select count(distinct sample_id) from gate_results join samples s on s.id = sample_id "
                              "where s.run_id = ? and s.kind = 'measure'", [run_id]).fetchone()[0]
        rules = conn.execute("select rule_name, outcome from rule_results where run_id = ?", [run_id]).fetchall()
    finally:
        conn.close()
    assert samples == planned
    assert judged == planned
    assert rules and {r[0] for r in rules} == {"fits"} and all(r[1] in ("pass", "fail", "undecided") for r in rules)


def test_a_failing_final_capture_keeps_status_coverage_gates_and_rules(llama_server, tmp_path, monkeypatch):
    real = run_record.capture_file

    def capture(store, path, *, run_id=None, **kw):
        if run_id is not None:  # the final capture, after the measurements
            raise sqlite3.IntegrityError("UNIQUE constraint failed: log_lines.id")
        return real(store, path, run_id=run_id, **kw)

    monkeypatch.setattr(run_record, "capture_file", capture)
    camp = write_campaign(tmp_path / "c.toml", llama_server.url, llama_server.log_path)
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "warning: log capture failed: IntegrityError: UNIQUE constraint failed: log_lines.id" in result.output
    run = run_row(db)
    assert (run["status"], run["exit_code"], run["samples_measured"], run["samples_planned"], run["coverage"]) == (
        "completed", 0, 2, 2, 1.0)
    assert run["error_text"] == "log capture failed: IntegrityError: UNIQUE constraint failed: log_lines.id"
    assert_evaluated(db, run["id"], 2)


def test_a_final_capture_waits_for_a_process_holding_the_write_lock(llama_server, tmp_path, monkeypatch):
    """Held for 6 s: longer than the store used to wait, shorter than it waits now."""
    real = run_record.capture_file
    held = {}

    def capture(store, path, *, run_id=None, **kw):
        if run_id is not None:
            holder = subprocess.Popen(
                [sys.executable, "-c",
                 "import sqlite3, sys, time\n"
                 "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                 "c.execute('begin immediate'); print('locked', flush=True); time.sleep(6); c.execute('commit')\n",
                 str(store.path)], stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "locked"
            t0 = time.monotonic()
            try:
                return real(store, path, run_id=run_id, **kw)
            finally:
                held["waited_s"] = time.monotonic() - t0
                holder.wait(timeout=30)
        return real(store, path, run_id=run_id, **kw)

    monkeypatch.setattr(run_record, "capture_file", capture)
    # lines that arrive during the run: the final capture has something to store
    camp = write_campaign(tmp_path / "c.toml", llama_server.url, llama_server.log_path)
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert held["waited_s"] >= 5.0
    run = run_row(db)
    assert (run["status"], run["exit_code"], run["coverage"], run["error_text"]) == ("completed", 0, 1.0, None)
    assert_evaluated(db, run["id"], 2)
    conn = sqlite3.connect(db)
    tagged = conn.execute("select count(*) from log_lines where run_id = ?", [run["id"]]).fetchone()[0]
    assert tagged > 0  # the run's own lines arrived after the wait


def _daemon_config(tmp_path: Path, db: Path, log: Path) -> Path:
    cfg = tmp_path / "daemon.toml"
    cfg.write_text(
        f'[daemon]\ndb = "{db}"\ndata_dir = "{tmp_path}"\ntick_s = 0.1\nheartbeat_s = 0.3\n'
        "queue_poll_s = 0.2\nstop_timeout_s = 30\n"
        f'[collectors]\nnvml = false\nlog_files = ["{log}"]\n'
    )
    return cfg


def _wait(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _daemon_ready(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        conn = sqlite3.connect(db)
        try:
            row = conn.execute("select ready_at from daemon_state order by id desc limit 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return bool(row and row[0])


def test_daemon_and_a_foreground_run_capture_the_same_log_without_losing_a_line(fresh_server, tmp_path):
    """Real processes: the daemon tails the server log while ``cardproof run`` measures and captures it too.

    Another writer keeps adding lines to the log meanwhile (opened for
    appending, as the server's own is), so both captures always have work.
    """
    log = fresh_server.log_path
    db = tmp_path / "shared.db"
    daemon_out = (tmp_path / "daemon.out").open("wb")
    daemon = subprocess.Popen([sys.executable, "-m", "cardproof.cli", "daemon", "run",
                               "--config", str(_daemon_config(tmp_path, db, log))],
                              stdout=daemon_out, stderr=subprocess.STDOUT)
    stop = threading.Event()

    def add_lines() -> None:
        n = 0
        with open(log, "ab", buffering=0) as f:
            while not stop.is_set():
                f.write(b"".join(b"filler line %d from another writer\n" % (n + i) for i in range(10000)))
                n += 10000
                time.sleep(0.2)

    filler = threading.Thread(target=add_lines, daemon=True)
    try:
        _wait(lambda: _daemon_ready(db), 60, "the daemon to be ready")
        filler.start()
        camp = write_campaign(tmp_path / "c.toml", fresh_server.url, log, reps=3)
        run = subprocess.run([sys.executable, "-m", "cardproof.cli", "run", str(camp), "--db", str(db)],
                             capture_output=True, text=True, timeout=300)
        stop.set()
        filler.join(timeout=10)
        time.sleep(2.5)  # one more daemon capture on top of the run's
    finally:
        stop.set()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        daemon_out.close()
        fresh_server.stop()  # the log is complete: nothing is appended after the last import
    assert run.returncode == 0, run.stderr[-2000:]
    assert "log capture failed" not in run.stderr
    daemon_text = (tmp_path / "daemon.out").read_text(errors="replace")
    assert "UNIQUE" not in daemon_text, daemon_text[-2000:]
    # the rest of the log, then: every line of the file stored exactly once, in order
    last = subprocess.run([sys.executable, "-m", "cardproof.cli", "logs", "import", str(log), "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    assert last.returncode == 0, last.stderr
    conn = sqlite3.connect(db)
    raws = [r[0] for r in conn.execute(
        "select raw from log_lines where source_id = (select id from log_sources where name = ?) order by id",
        [os.path.abspath(log)])]
    conn.close()
    assert raws == log.read_text(errors="replace").splitlines()
    row = run_row(db)
    assert (row["status"], row["exit_code"], row["samples_measured"], row["coverage"], row["error_text"]) == (
        "completed", 0, 3, 1.0, None)
    assert_evaluated(db, row["id"], 3)
