"""The daemon as a real process against the real llama-server: SIGKILL at several
points, restart, resume; SIGTERM with a real NOTIFY_SOCKET.

The server's own ``print_timing`` lines are the independent record of the
requests it served; every stored sample must match one of them, and none twice.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.logs.timings import print_timings
from conftest import campaign_text


def wait_until(pred, timeout_s: float, what: str, interval_s: float = 0.01):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def write_config(tmp_path: Path, db: Path, *, max_attempts: int = 5) -> Path:
    cfg = tmp_path / "daemon.toml"
    cfg.write_text(
        f'[daemon]\ndb = "{db}"\ndata_dir = "{tmp_path}"\ntick_s = 0.1\nheartbeat_s = 0.3\n'
        f"queue_poll_s = 0.1\nstop_timeout_s = 30\nmax_attempts = {max_attempts}\n"
        "[collectors]\nnvml = false\n"
    )
    return cfg


def start_daemon(cfg: Path, tmp_path: Path, n: int, env: dict | None = None) -> subprocess.Popen:
    err = (tmp_path / f"daemon-{n}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "cardproof.cli", "daemon", "run", "--config", str(cfg)],
                            stdout=err, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    err.close()
    return proc


def in_flight(log: Path) -> int:
    """Requests the server has started and not yet finished, from its own log."""
    text = log.read_text(errors="replace")
    return text.count("| processing task") - text.count("| stop processing")


class SlowEmbedding:
    """An embedding endpoint that answers after a delay: it widens the gap between cells."""

    def __init__(self, delay_s: float):
        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(delay_s)
                body = json.dumps({"data": [{"embedding": [0.1, 0.2, 0.3]}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _q(db: Path, sql: str, *args):
    conn = sqlite3.connect(db, timeout=5)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def served_requests(log: Path) -> list[dict]:
    """print_timing entries per request, kept apart per router child.

    print_timings() keys by task number alone; task numbers restart in every
    child (each model, each reload), so the lines are paired per child here.
    """
    pending: dict[tuple, str] = {}
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if "print_timing" not in line or "eval time" not in line:
            continue
        port = line.split("]", 1)[0] if line.startswith("[") else ""
        task = line.split("| task ", 1)[1].split(" ", 1)[0]
        if "prompt eval time" in line:
            pending[(port, task)] = line
        elif (port, task) in pending:
            out += print_timings(pending.pop((port, task)) + "\n" + line)
    return out


def _matches_server_log(db: Path, log: Path) -> tuple[int, int]:
    """Every stored sample matches a distinct print_timing entry; returns (stored, unmatched served)."""
    time.sleep(0.3)  # the router relays child output asynchronously
    served = served_requests(log)
    stored = _q(db, "select prompt_tokens, generated_tokens, prompt_ms, predicted_ms from samples "
                    "where error_kind is null order by id")
    assert len({r[0] for r in _q(db, "select nonce from samples")}) == len(_q(db, "select id from samples"))
    unused = list(served)
    for p_n, g_n, p_ms, g_ms in stored:
        hit = next((t for t in unused if t["prompt"][1] == p_n and t["eval"][1] == g_n
                    and abs(t["prompt"][0] - p_ms) < 0.006 and abs(t["eval"][0] - g_ms) < 0.006), None)
        assert hit is not None, f"stored sample ({p_n}, {g_n}, {p_ms}, {g_ms}) was never served"
        unused.remove(hit)
    return len(stored), len(unused)


def test_sigkill_during_load_request_and_between_cells_then_resume(fresh_server, tmp_path):
    url, log = fresh_server.url, fresh_server.log_path
    emb = SlowEmbedding(0.4)
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(url, models=("tiny-b", "tiny-a"), classes=("short", "medium"), reps=2,
                                  max_tokens=16) + f'\n[embedding]\nurl = "{emb.url}"\n')
    db = tmp_path / "d.db"
    cfg = write_config(tmp_path, db)
    assert CliRunner().invoke(cli, ["queue", "add", str(camp), "--config", str(cfg)]).exit_code == 0
    kills = []

    def models():
        return {m["id"]: m["status"]["value"] for m in httpx.get(url + "/models", timeout=5).json()["data"]}

    def run_samples(run_id):
        return _q(db, "select count(*) from samples where run_id = ?", run_id)[0][0]

    def newest_run(after):
        rows = _q(db, "select max(id) from runs")
        return rows[0][0] if rows and rows[0][0] and rows[0][0] > after else None

    try:
        # 1: during a load (the router reports the model 'loading')
        d = start_daemon(cfg, tmp_path, 1)
        wait_until(lambda: "loading" in models().values(), 60, "a model load")
        d.send_signal(signal.SIGKILL)
        d.wait(10)
        kills.append("load")

        # 2: during a request (the server has started a task it has not finished)
        d = start_daemon(cfg, tmp_path, 2)
        run2 = wait_until(lambda: newest_run(1), 60, "run 2")
        wait_until(lambda: run_samples(run2) >= 2, 60, "two samples of run 2")
        wait_until(lambda: in_flight(log) > 0, 60, "a request in flight")
        stored_at_kill = run_samples(run2)
        d.send_signal(signal.SIGKILL)
        d.wait(10)
        kills.append("request")

        # 3: between cells (cell 1 done and its closing checks under way)
        d = start_daemon(cfg, tmp_path, 3)
        run3 = wait_until(lambda: newest_run(run2), 60, "run 3")
        wait_until(lambda: _q(db, "select count(*) from cell_checks k join cells c on c.id = k.cell_id "
                                  "where c.run_id = ? and k.phase = 'after'", run3)[0][0] >= 1,
                   60, "the end of run 3's first cell")
        d.send_signal(signal.SIGKILL)
        d.wait(10)
        kills.append("between cells")

        # 4: the resumed run completes; then SIGTERM on an idle daemon exits 0
        d = start_daemon(cfg, tmp_path, 4)
        wait_until(lambda: _q(db, "select status from daemon_queue where id = 1")[0][0] == "done", 120,
                   "the queue entry to be done")
        d.send_signal(signal.SIGTERM)
        assert d.wait(30) == 0
    finally:
        if d.poll() is None:
            d.kill()
        emb.close()

    runs = _q(db, "select id, status, exit_code, samples_planned, samples_measured, coverage, error_text "
                  "from runs order by id")
    assert [r[1] for r in runs] == ["interrupted", "interrupted", "interrupted", "completed"]
    for rid, status, code, planned, measured, coverage, error in runs[:3]:
        assert code == 130 and "found 'running' when daemon" in error
        assert measured == run_samples(rid) and coverage == measured / planned
    assert run_samples(run2) == stored_at_kill == 2  # the request in flight was not stored
    assert run_samples(run3) == 2  # cell 1 only
    assert runs[3][3:6] == (8, 8, 1.0)
    q = _q(db, "select status, attempts, last_run_id from daemon_queue where id = 1")[0]
    assert q == ("done", 4, runs[3][0])
    assert [r[0] for r in _q(db, "select run_id from daemon_queue_runs order by id")] == [r[0] for r in runs]
    recovered = [json.loads(r[0]) for r in _q(db, "select recovered_json from daemon_state order by id")]
    assert [item["run_id"] for item in recovered[1] if "run_id" in item] == [runs[0][0]]
    stored, unmatched = _matches_server_log(db, log)
    assert stored == sum(run_samples(r[0]) for r in runs)
    assert unmatched <= kills.count("request")  # only the request cut off by SIGKILL went unstored


def test_sigterm_finishes_the_request_marks_interrupted_and_notifies(fresh_server, tmp_path):
    url, log = fresh_server.url, fresh_server.log_path
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(url, models=("tiny-b",), classes=("medium",), reps=5, max_tokens=16))
    db = tmp_path / "d.db"
    cfg = write_config(tmp_path, db)
    assert CliRunner().invoke(cli, ["queue", "add", str(camp), "--config", str(cfg)]).exit_code == 0
    sockdir = tempfile.mkdtemp(prefix="cpn", dir="/tmp")
    path = os.path.join(sockdir, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    msgs: list[str] = []
    reading = threading.Event()

    def systemd():  # reads like systemd does, while the daemon runs
        while not reading.is_set():
            try:
                msgs.append(sock.recv(4096).decode())
            except socket.timeout:
                pass

    reader = threading.Thread(target=systemd, daemon=True)
    reader.start()
    d = start_daemon(cfg, tmp_path, 1, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "500000"})
    try:
        wait_until(lambda: _q(db, "select count(*) from samples")[0][0] >= 1, 60, "a first sample")
        # the progress STATUS= follows the sample on the daemon's main loop: on a busy machine a SIGTERM
        # sent at once could stop the daemon before that loop ran (the run never said its tok/s)
        wait_until(lambda: any(m.startswith("STATUS=run 1 (test): [") and "tok/s" in m for m in list(msgs)), 60,
                   "a progress STATUS= with the first sample's tok/s")
        wait_until(lambda: in_flight(log) > 0, 60, "a request in flight")
        stored_at_term = _q(db, "select count(*) from samples")[0][0]
        d.send_signal(signal.SIGTERM)
        assert d.wait(30) == 0, (tmp_path / "daemon-1.log").read_text()
    finally:
        if d.poll() is None:
            d.kill()
    time.sleep(0.3)
    reading.set()
    reader.join(5)
    sock.close()
    os.unlink(path)
    os.rmdir(sockdir)

    run = _q(db, "select status, exit_code, samples_planned, samples_measured, coverage, error_text from runs")[0]
    assert run[0] == "interrupted" and run[1] == 130 and "SIGTERM" in run[5]
    assert run[3] == stored_at_term + 1  # the request in flight was finished and stored
    assert run[4] == run[3] / run[2]
    stored, unmatched = _matches_server_log(db, log)
    assert (stored, unmatched) == (run[3], 0)  # nothing served went unstored
    q = _q(db, "select status, reason from daemon_queue")[0]
    assert q[0] == "queued" and "interrupted by SIGTERM" in q[1] and "resumes as a new run" in q[1]
    state = _q(db, "select state, exit_reason from daemon_state")[0]
    assert state == ("stopped", "signal SIGTERM, exit code 0")

    kinds = [m.splitlines()[0].split("=")[0] for m in msgs]
    assert kinds[0] == "READY" and "STOPPING" in kinds and "WATCHDOG" in kinds
    assert kinds.index("STOPPING") > kinds.index("READY")
    assert any(m.startswith("STATUS=run 1 (test): [") and "tok/s" in m for m in msgs)
    assert not any("READY" in m for m in msgs[1:])
    status = CliRunner().invoke(cli, ["status", "--config", str(cfg)])
    assert status.exit_code == 3 and "daemon: stopped at" in status.output
