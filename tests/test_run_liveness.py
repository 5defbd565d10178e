"""A run whose process is gone is recognised as interrupted.

The liveness signs are real: a child Python process holds the run's flock
and is SIGKILLed, /proc gives pids and start times, the daemon runs in a
thread against a real SQLite file. No server is needed here; the SIGKILLed
``cardproof run`` against the real llama-server is in test_run_liveness_real.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import liveness
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import register_campaign
from cardproof.daemon.service.config import parse_config
from cardproof.daemon.service.main import Daemon
from cardproof.daemon.store import open_store, utcnow
from cardproof.report.queries import runs as q_runs
from conftest import campaign_text

DEFAULTS = {"default_db": Path("/tmp/x.db"), "default_data_dir": Path("/tmp/x")}

# Holds a run the way the runner does (lock taken, row written, lock named), stores
# two samples, then sleeps until it is killed.
CHILD = """
import sys, time
from cardproof.daemon.store import liveness
from cardproof.daemon.store import open_store, utcnow
store = open_store(sys.argv[1])
with liveness.RunLock(store.path) as lock:
    ident = liveness.this_process()
    rid = store.insert("runs", {"campaign_id": int(sys.argv[2]), **ident, "status": "running",
                                "started_at": utcnow(), "samples_planned": 20})
    lock.bind(rid, ident)
    for rep, err in ((1, None), (2, "timeout"), (3, None)):
        store.insert("samples", {"run_id": rid, "repetition": rep, "kind": "measure", "error_kind": err,
                                 "nonce": str(rep), "started_at": utcnow()})
    print(rid, flush=True)
    time.sleep(120)
"""


def _campaign_id(store) -> int:
    return register_campaign(store, parse_campaign(campaign_text("http://127.0.0.1:9"), "c.toml"))


def _row(store, run_id) -> dict:
    return dict(store.db["runs"].get(run_id))


def _effective(store, run_id) -> dict:
    return next(r for r in q_runs(store.db) if r["id"] == run_id)


def _insert(store, **values) -> int:
    return store.insert("runs", {"campaign_id": _campaign_id(store), "status": "running", "started_at": utcnow(),
                                 "samples_planned": 4, **values})


def _holder(db: Path, store):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(_campaign_id(store))],
                            stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def test_a_sigkilled_holder_reads_running_then_interrupted_and_only_a_writer_persists_it(tmp_path):
    db = tmp_path / "l.db"
    store = open_store(db)
    proc, rid = _holder(db, store)
    try:
        live = _effective(store, rid)
        assert live["status"] == "running" and "holds the run's lock" in live["liveness"]
        assert (live["samples_measured"], live["samples_failed"], live["coverage"]) == (2, 1, 0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    dead = _effective(store, rid)
    assert dead["status"] == "interrupted" and dead["stored_status"] == "running"
    assert f"process gone (pid {proc.pid} on host {socket.gethostname()})" in dead["liveness"]
    assert (dead["samples_measured"], dead["samples_planned"], dead["coverage"]) == (2, 20, 0.1)
    out = CliRunner().invoke(cli, ["runs", "--db", str(db)]).output
    assert "interrupted" in out and "(2/20)" in out and f"pid {proc.pid}" in out
    assert _row(store, rid)["status"] == "running"  # readers show, they do not write

    done = liveness.reconcile_runs(store, by="test")
    assert [d["run_id"] for d in done] == [rid]
    row = _row(store, rid)
    last = store.db.execute("select max(started_at) from samples where run_id = ?", [rid]).fetchone()[0]
    assert (row["status"], row["samples_measured"], row["samples_failed"], row["coverage"]) == ("interrupted", 2, 1, 0.1)
    assert row["ended_at"] == last and f"pid {proc.pid}" in row["error_text"] and "last sample at" in row["error_text"]
    assert not list(tmp_path.glob("*.lock"))  # the dead run's lock file is swept
    assert liveness.reconcile_runs(store, by="test") == []  # once


def test_a_live_process_that_let_go_of_the_lock_is_interrupted(tmp_path):
    """The runner raised (a bug, a store failure) but the process lives on, as the daemon does."""
    store = open_store(tmp_path / "g.db")
    with liveness.RunLock(store.path) as lock:
        ident = liveness.this_process()
        rid = _insert(store, **ident)
        lock.bind(rid, ident)
        assert _effective(store, rid)["status"] == "running"
    r = _effective(store, rid)
    assert r["status"] == "interrupted" and "no longer holds the run's lock" in r["liveness"]


def test_a_finished_run_removes_its_lock_and_keeps_its_own_status(tmp_path):
    store = open_store(tmp_path / "f.db")
    with liveness.RunLock(store.path) as lock:
        ident = liveness.this_process()
        rid = _insert(store, **ident)
        lock.bind(rid, ident)
        stale_view = dict(store.db["runs"].get(rid))
        store.update("runs", rid, {"status": "completed", "coverage": 1.0})
        lock.release(finished=True)
    assert not list(tmp_path.glob("*.lock"))
    # a reader that read 'running' just before the runner wrote its end sees the end, not a death
    assert liveness.effective_runs(store.db, [stale_view])[0]["status"] == "completed"
    assert liveness.reconcile_runs(store, by="test") == [] and _row(store, rid)["status"] == "completed"


def test_pid_gone_or_reused_without_a_lock_file(tmp_path):
    store = open_store(tmp_path / "p.db")
    here = liveness.this_process()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    gone = _insert(store, **{**here, "pid": child.pid, "pid_start_ticks": 1})
    reused = _insert(store, **{**here, "pid_start_ticks": here["pid_start_ticks"] - 1})
    alive = _insert(store, **here)
    v = {r["id"]: r for r in q_runs(store.db)}
    assert v[gone]["status"] == "interrupted" and f"pid {child.pid}" in v[gone]["liveness"]
    assert v[reused]["status"] == "interrupted" and "another process now" in v[reused]["liveness"]
    assert v[alive]["status"] == "running"
    assert {d["run_id"] for d in liveness.reconcile_runs(store, by="test")} == {gone, reused}


def test_a_lock_file_of_another_run_or_database_is_not_taken_as_this_runs(tmp_path):
    store = open_store(tmp_path / "o.db")
    here = liveness.this_process()
    rid = _insert(store, **here)
    # left by a deleted database of the same name: free, and naming another process
    liveness.lock_path(store.path, rid).write_text('{"run_id": %d, "pid": 1, "pid_start_ticks": 5}' % rid)
    assert _effective(store, rid)["status"] == "running"  # our pid is alive: the file proves nothing
    liveness.lock_path(store.path, rid).write_text("not json")
    assert _effective(store, rid)["status"] == "running"


def test_another_machine_is_running_or_stale_and_never_written(tmp_path):
    store = open_store(tmp_path / "m.db")
    old = (datetime.now(timezone.utc) - timedelta(hours=2)).isoformat()
    remote = {"host": "elsewhere", "pid": 4242, "pid_start_ticks": 7, "boot_id": "other-boot", "pid_ns": "x"}
    recent = _insert(store, **remote)
    quiet = _insert(store, **remote, started_at=old)
    store.insert("samples", {"run_id": recent, "repetition": 1, "kind": "measure", "started_at": utcnow()})
    legacy = _insert(store, started_at="2026-01-01")  # before liveness columns: no pid, a naive time
    v = {r["id"]: r for r in q_runs(store.db)}
    assert v[recent]["status"] == "running" and "on host elsewhere" in v[recent]["liveness"]
    assert v[quiet]["status"] == "stale" and "nothing heard" in v[quiet]["liveness"]
    assert v[legacy]["status"] == "stale"
    assert liveness.reconcile_runs(store, by="test") == []
    assert {r["status"] for r in store.db.query("select status from runs")} == {"running"}


def test_same_host_after_a_reboot_is_interrupted(tmp_path):
    store = open_store(tmp_path / "b.db")
    rid = _insert(store, **{**liveness.this_process(), "boot_id": "an-earlier-boot"})
    r = _effective(store, rid)
    assert r["status"] == "interrupted" and "booted again" in r["liveness"]


def test_daemon_start_marks_a_dead_foreground_run_interrupted_and_status_shows_it(tmp_path):
    db = tmp_path / "d.db"
    store = open_store(db)
    proc, dead = _holder(db, store)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    live = _insert(store, **liveness.this_process())  # a foreground run whose process (us) is alive
    status = CliRunner().invoke(cli, ["status", "--db", str(db)])
    assert f"run {dead} marked running" in status.output and "now interrupted: process gone" in status.output
    cfgfile = tmp_path / "daemon.toml"
    cfgfile.write_text(f'[daemon]\ndb = "{db}"\ndata_dir = "{tmp_path}"\ntick_s = 0.05\nheartbeat_s = 0.2\n'
                       "queue_poll_s = 0.05\n[collectors]\nnvml = false\n")
    daemon = Daemon(parse_config(cfgfile.read_text(), str(cfgfile), **DEFAULTS), log=lambda line: None)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("code", daemon.run()))
    t.start()
    for _ in range(200):
        if store.db.execute("select count(*) from daemon_state where ready_at is not null").fetchone()[0]:
            break
        time.sleep(0.05)
    daemon.request_stop()
    t.join(10)
    assert result["code"] == 0
    assert _row(store, dead)["status"] == "interrupted" and "daemon" in _row(store, dead)["error_text"]
    assert _row(store, live)["status"] == "running"
    recovered = store.db.execute("select recovered_json from daemon_state").fetchone()[0]
    assert f'"run_id":{dead}' in recovered and "marked interrupted" in recovered


def test_damaged_running_rows_are_shown_not_crashed_on(tmp_path):
    """Rows no runner writes (a hand edit, a damaged merge) never stop `cardproof runs` or a reconcile."""
    db = tmp_path / "h.db"
    store = open_store(db)
    here = liveness.this_process()
    odd = [
        _insert(store, **{**here, "pid": "abc", "pid_start_ticks": "x"}, samples_planned="many"),
        _insert(store, **{**here, "pid": -5}, started_at="not a time", samples_planned=-3),
        _insert(store, host=None, boot_id=12, pid=None, started_at=None, samples_planned=None),
    ]
    store.insert("samples", {"run_id": odd[1], "repetition": 1, "kind": "measure", "started_at": "yesterday"})
    out = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert out.exit_code == 0, out.output
    shown = {r["id"]: r for r in q_runs(store.db)}
    assert [shown[i]["status"] for i in odd] == ["interrupted", "interrupted", "stale"]
    assert shown[odd[0]]["coverage"] == 0.0
    assert {d["run_id"] for d in liveness.reconcile_runs(store, by="test")} == set(odd[:2])


def test_a_database_reached_through_a_symlink_finds_the_same_lock(tmp_path):
    real = tmp_path / "real.db"
    store = open_store(real)
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with liveness.RunLock(link) as lock:
        ident = liveness.this_process()
        rid = _insert(store, **ident)
        lock.bind(rid, ident)
        assert "holds the run's lock" in _effective(store, rid)["liveness"]
    assert "no longer holds the run's lock" in _effective(store, rid)["liveness"]


def test_a_failing_reconcile_never_stops_the_next_run(tmp_path, monkeypatch):
    """Fault injected into the check itself: the new run still runs and writes its own status."""
    from cardproof.daemon.server.llamacpp import free_port
    from cardproof.daemon.run.runner import run_campaign

    def broken(*a, **k):
        raise RuntimeError("injected")

    monkeypatch.setattr(liveness, "reconcile_runs", broken)
    store = open_store(tmp_path / "x.db")
    lines = []
    camp = parse_campaign(campaign_text(f"http://127.0.0.1:{free_port()}"), "c.toml")
    outcome = run_campaign(store, camp, echo=lines.append)
    assert outcome.status == "failed" and _row(store, outcome.run_id)["status"] == "failed"
    assert any("not marked interrupted: RuntimeError: injected" in ln for ln in lines)
    assert not list(tmp_path.glob("*.lock"))
