"""The daemon's parts without a server: config, sd_notify, unit, progress, queue, recovery, status."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import register_campaign
from cardproof.daemon.service import queue
from cardproof.daemon.service.config import ConfigError, EXAMPLE_CONFIG, parse_config
from cardproof.daemon.service.main import Daemon, DaemonError, DaemonLock
from cardproof.daemon.service.notify import Notifier
from cardproof.daemon.service.progress import Progress, StopRun
from cardproof.daemon.service.statusview import daemon_status, format_status
from cardproof.daemon.service.unit import render_unit, verify_unit
from cardproof.daemon.store import open_store, utcnow
from conftest import campaign_text

DEFAULTS = {"default_db": Path("/tmp/x.db"), "default_data_dir": Path("/tmp/x")}


@pytest.fixture
def notify_socket():
    """A real unix datagram socket standing in for systemd's NOTIFY_SOCKET."""
    d = tempfile.mkdtemp(prefix="cpn", dir="/tmp")  # sun_path is limited to 108 bytes
    path = os.path.join(d, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.5)
    yield path, sock
    sock.close()
    os.unlink(path)
    os.rmdir(d)


def _recv_all(sock) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except (socket.timeout, BlockingIOError):
            return out


def test_example_config_parses_and_errors_name_file_and_key():
    cfg = parse_config(EXAMPLE_CONFIG, "daemon.toml", **DEFAULTS)
    assert cfg.db == Path("/var/lib/cardproof/cardproof.db") and cfg.quiet.quiet_s == 300
    bad = {
        "[quiet]\nquiet_s = -1\n": "daemon.toml: key 'quiet.quiet_s': expected a finite number above 0 up to",
        "[metrics]\nbind = \"0.0.0.0\"\n": "key 'metrics.bind': expected a loopback address",
        "[daemon]\ntick = 1\n": "key 'daemon.tick': unknown key",
        "[daemons]\n": "key 'daemons': unknown section",
        "[quiet]\nblocked_clients = [\"host.lan\"]\n": "key 'quiet.blocked_clients[0]': expected an IP address",
        "[quiet]\nquiet_s = 60\ngive_up_s = 30\n": "key 'quiet.give_up_s': must be at least quiet_s",
        "[daemon\n": "key '-': not valid TOML",
    }
    for text, message in bad.items():
        with pytest.raises(ConfigError) as e:
            parse_config(text, "daemon.toml", **DEFAULTS)
        assert message in str(e.value) and "\n" not in str(e.value)
    # data_dir alone puts the database inside it
    assert parse_config('[daemon]\ndata_dir = "/srv/cp"\n', "d.toml", **DEFAULTS).db == Path("/srv/cp/cardproof.db")


def test_daemon_run_with_a_bad_config_exits_2_with_one_line(tmp_path):
    cfg = tmp_path / "daemon.toml"
    cfg.write_text("[retention]\nmemory_bucket_s = 0\n")
    result = CliRunner().invoke(cli, ["daemon", "run", "--config", str(cfg)])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: {cfg}: key 'retention.memory_bucket_s': expected an integer from 1 to 86,400, got int 0")
    missing = CliRunner().invoke(cli, ["daemon", "run", "--config", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2 and "nope.toml: key '-': no such file" in missing.output


def test_sd_notify_over_a_real_socket(notify_socket):
    path, sock = notify_socket
    n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    assert n.enabled and n.watchdog_s == 2.0
    assert n.ready("idle")
    assert n.watchdog(now=100.0) and not n.watchdog(now=100.5)  # at most every half interval
    assert n.watchdog(now=101.1)
    assert n.status("run 1: [1/4]") and not n.status("run 1: [1/4]")  # unchanged text is not resent
    assert n.stopping("stopping")
    msgs = _recv_all(sock)
    assert msgs[0].splitlines()[:2] == ["READY=1", f"MAINPID={os.getpid()}"] and "STATUS=idle" in msgs[0]
    assert msgs[1:] == ["WATCHDOG=1", "WATCHDOG=1", "STATUS=run 1: [1/4]", "STOPPING=1\nSTATUS=stopping"]
    # without systemd every call is a no-op, and a watchdog meant for another PID is ignored
    assert not Notifier({}).ready()
    assert Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}).watchdog_s is None


def test_unit_file_has_the_hardening_and_passes_systemd_analyze(tmp_path):
    cfg = parse_config(EXAMPLE_CONFIG, "/etc/cardproof/daemon.toml", **DEFAULTS)
    text = render_unit(cfg, Path("/etc/cardproof/daemon.toml"), user="cardproof")
    for line in ("Type=notify", "WatchdogSec=60", "Restart=on-failure", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ReadWritePaths=/var/lib/cardproof", "PrivateTmp=yes",
                 "User=cardproof", "StateDirectory=cardproof", "TimeoutStopSec=150"):
        assert line in text.splitlines(), line
    assert "daemon run --config /etc/cardproof/daemon.toml" in text
    out = tmp_path / "cardproof.service"
    cfgfile = tmp_path / "daemon.toml"
    data = tmp_path / "data"
    cfgfile.write_text(f'[daemon]\ndata_dir = "{data}"\n')
    result = CliRunner().invoke(cli, ["daemon", "install-unit", "--output", str(out), "--no-verify",
                                      "--config", str(cfgfile)])
    assert result.exit_code == 0, result.output
    assert f"ReadWritePaths={data}" in out.read_text()
    ok, why = verify_unit(out)
    if ok is None:
        pytest.skip(why)
    assert ok, why


def test_progress_parses_echo_and_stops_only_after_a_stored_sample():
    p = Progress()
    p.begin(7, "nightly")
    p.echo("run 12: campaign nightly (abcdef012345), 2 cells, 3 samples planned")
    p.stop_requested.set()
    p.echo("load tiny-a: loaded in 0.52 s")  # a load line never stops the run: its row comes after it
    with pytest.raises(StopRun):
        p.echo("[1/3] tiny-a short reasoning=off rep 1/2: decode 812.5 tok/s, prefill 9000.0 tok/s, prompt 40 tok")
    p.echo("[2/3] tiny-a short reasoning=off rep 2/2: exception (timeout): no answer")  # raised once only
    s = p.snapshot()
    assert (s.run_id, s.done, s.planned, s.measured, s.failed, s.last_decode_tps) == (12, 2, 3, 1, 1, 812.5)
    assert (s.model, s.prompt_class, s.repetition, s.repetitions, s.phase) == ("tiny-a", "short", 2, 2, "stopping")
    last = Progress()
    last.begin(8, "c")
    last.echo("run 1: campaign c (ab), 1 cells, 1 samples planned")
    last.stop_requested.set()
    last.echo("[1/1] m short reasoning=off rep 1/1: decode 10.0 tok/s")  # the last sample: the run completes
    assert "run 1 (c): [1/1] m short reasoning=off rep 1/1, coverage 100%, last 10.0 tok/s" in last.snapshot().status_line()


def test_lock_allows_one_daemon_per_database(tmp_path):
    a = DaemonLock(tmp_path / "c.db")
    a.acquire()
    with pytest.raises(DaemonError, match=rf"another cardproof daemon \(pid {os.getpid()}\)"):
        DaemonLock(tmp_path / "c.db").acquire()
    a.release()
    b = DaemonLock(tmp_path / "c.db")
    b.acquire()
    b.release()


def _run_row(store, campaign, status="running", planned=4):
    cid = register_campaign(store, campaign)
    return store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": status,
                                 "samples_planned": planned})


def test_recovery_marks_daemon_runs_interrupted_and_requeues(tmp_path):
    store = open_store(tmp_path / "r.db")
    camp = parse_campaign(campaign_text("http://127.0.0.1:9"), "c.toml")
    other = parse_campaign(campaign_text("http://127.0.0.1:9", reps=3), "o.toml")
    q1 = queue.enqueue(store, camp)
    e1 = queue.claim_next(store)
    linked = _run_row(store, camp)
    queue.link_run(store, q1, linked, e1.attempts, None)
    for rep, err in ((1, None), (2, "timeout")):
        store.insert("samples", {"run_id": linked, "repetition": rep, "kind": "measure", "error_kind": err,
                                 "started_at": utcnow()})
    queue.finish(store, q1, "running")
    foreground = _run_row(store, other)  # a `cardproof run` in another terminal: not ours
    q2 = queue.enqueue(store, other)
    queue.claim_next(store)
    unlinked = _run_row(store, other)  # killed between the runner's insert and the link
    daemon_id = store.insert("daemon_state", {"state": "starting"})
    done = queue.recover(store, daemon_id=daemon_id, max_attempts=3, last_heartbeat=None)
    runs = {r["id"]: r for r in store.db.query("select * from runs")}
    assert runs[linked]["status"] == "interrupted" and runs[linked]["exit_code"] == 130
    assert (runs[linked]["samples_measured"], runs[linked]["samples_failed"], runs[linked]["coverage"]) == (1, 1, 0.25)
    assert "never" not in runs[linked]["error_text"] and "killed" in runs[linked]["error_text"]
    assert runs[foreground]["status"] == "running"
    assert runs[unlinked]["status"] == "interrupted"
    assert {r["status"] for r in store.db.query("select status from daemon_queue")} == {"queued"}
    assert any(d.get("action") == "left running" and d["run_id"] == foreground for d in done)
    assert store.db["daemon_queue"].get(q2)["reason"].endswith("resumes as a new run (attempt 2 of 3)")
    assert not any(r["status"] == "completed" for r in runs.values())


def test_daemon_loop_in_process_fails_an_unreachable_campaign_and_stops_cleanly(tmp_path):
    db = tmp_path / "d.db"
    camp = tmp_path / "c.toml"
    from cardproof.daemon.server.llamacpp import free_port

    camp.write_text(campaign_text(f"http://127.0.0.1:{free_port()}"))
    cfgfile = tmp_path / "daemon.toml"
    cfgfile.write_text(f'[daemon]\ndb = "{db}"\ndata_dir = "{tmp_path}"\ntick_s = 0.05\nheartbeat_s = 0.2\n'
                       "queue_poll_s = 0.05\n[collectors]\nnvml = false\n")
    assert CliRunner().invoke(cli, ["queue", "add", str(camp), "--config", str(cfgfile)]).exit_code == 0
    cfg = parse_config(cfgfile.read_text(), str(cfgfile), **DEFAULTS)
    daemon = Daemon(cfg, log=lambda line: None)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("code", daemon.run()))
    t.start()
    store = open_store(db)
    for _ in range(200):
        row = store.db["daemon_queue"].get(1)
        if row["status"] == "failed":
            break
        threading.Event().wait(0.05)
    daemon.request_stop()
    t.join(10)
    assert result["code"] == 0
    assert row["status"] == "failed" and "server not reachable" in row["reason"]
    run = store.db["runs"].get(row["last_run_id"])
    assert (run["status"], run["exit_code"]) == ("failed", 1)
    s = daemon_status(store)
    assert s["daemon"]["verdict"] == "stopped" and s["daemon"]["collectors"]["heartbeat"]["state"] == "running"
    assert any("failed" in line for line in format_status(s))


def test_status_tells_never_started_running_and_dead_apart(tmp_path):
    db = tmp_path / "s.db"
    r = CliRunner().invoke(cli, ["status", "--db", str(db)])
    assert r.exit_code == 0 and "no daemon has run" in r.output  # documented: nothing wrong, nothing to report
    assert not db.exists()
    store = open_store(db)
    r = CliRunner().invoke(cli, ["status", "--db", str(db)])
    assert r.exit_code == 0 and "no daemon has run" in r.output
    did = store.insert("daemon_state", {"pid": os.getpid(), "host": socket.gethostname(), "state": "running",
                                        "heartbeat_at": utcnow(), "heartbeat_s": 5.0,
                                        "status_text": "run 3 (x): [2/8]",
                                        "progress_json": '{"run_id": 3, "done": 2, "planned": 8, "coverage": 0.25,'
                                                         ' "campaign": "x", "model": "m", "prompt_class": "short",'
                                                         ' "repetition": 2, "repetitions": 4, "last_decode_tps": 99.5}'})
    r = CliRunner().invoke(cli, ["status", "--db", str(db)])
    assert r.exit_code == 0 and "running: pid" in r.output and "coverage 25%, last decode 99.5 tok/s" in r.output
    store.update("daemon_state", did, {"heartbeat_at": "2020-01-01T00:00:00.000000+00:00"})
    r = CliRunner().invoke(cli, ["status", "--db", str(db), "--json"])
    assert r.exit_code == 3 and '"verdict": "dead"' in r.output


def test_a_request_that_outlives_stop_timeout_is_recorded_as_interrupted(tmp_path):
    """systemd would SIGKILL next: the daemon records the interruption itself first."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    release = threading.Event()

    class Hanging(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b'{"data": [{"id": "tiny-a"}]}' if self.path.startswith("/models") else b"{}"
            self.send_response(200 if not self.path.startswith("/metrics") else 501)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802
            release.wait(10)  # a request that takes longer than the daemon may wait
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hanging)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    db = tmp_path / "h.db"
    cfgfile = tmp_path / "daemon.toml"
    cfgfile.write_text(f'[daemon]\ndb = "{db}"\ntick_s = 0.05\nheartbeat_s = 0.2\nqueue_poll_s = 0.05\n'
                       "stop_timeout_s = 0.5\n[collectors]\nnvml = false\n")
    store = open_store(db)
    queue.enqueue(store, parse_campaign(campaign_text(f"http://127.0.0.1:{server.server_address[1]}"), "h.toml"))
    daemon = Daemon(parse_config(cfgfile.read_text(), str(cfgfile), **DEFAULTS), log=lambda line: None)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("code", daemon.run()))
    t.start()
    try:
        for _ in range(200):
            if store.db["daemon_queue"].get(1)["last_run_id"]:
                break
            threading.Event().wait(0.05)
        threading.Event().wait(0.2)  # the sample request is now hanging
        daemon.request_stop()
        t.join(10)
        assert result["code"] == 1
        run = store.db["runs"].get(1)
        assert run["status"] == "interrupted" and "after 0.5 s with a request still in flight" in run["error_text"]
        assert store.db["daemon_queue"].get(1)["status"] == "queued"
        assert store.db.execute("select exit_reason from daemon_state").fetchone()[0] == "signal SIGTERM, exit code 1"
    finally:
        release.set()
        if daemon.worker is not None:
            daemon.worker.join(10)
        server.shutdown()
        server.server_close()


def test_run_via_daemon_queues_the_campaign(tmp_path):
    """`cardproof run --via-daemon` validates, then only queues: nothing is measured here."""
    from click.testing import CliRunner

    from cardproof.cli import cli
    from cardproof.daemon.store import open_store

    camp = tmp_path / "c.toml"
    camp.write_text('[server]\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "m"\n')
    db = tmp_path / "q.db"
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db), "--via-daemon"])
    assert result.exit_code == 0, result.output
    assert "queued as 1" in result.output
    store = open_store(db)
    assert store.db["daemon_queue"].count == 1 and store.db["runs"].count == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[server]\nurl = "nope"\n[[models]]\nname = "m"\n')
    result = CliRunner().invoke(cli, ["run", str(bad), "--db", str(db), "--via-daemon"])
    assert result.exit_code == 2 and store.db["daemon_queue"].count == 1


def test_daemon_collectors_tail_a_log_and_say_there_is_no_driver(tmp_path):
    """The log collector captures lines appended while the daemon runs; without an
    NVIDIA driver the NVML collector says so (and writes the one 'not measured' row)."""
    db = tmp_path / "d.db"
    log = tmp_path / "server.log"
    log.write_text("0.00.000.001 I srv  load: first line\n")
    cfgfile = tmp_path / "daemon.toml"
    cfgfile.write_text(f'[daemon]\ndb = "{db}"\ndata_dir = "{tmp_path}"\ntick_s = 0.05\nheartbeat_s = 0.2\n'
                       f'queue_poll_s = 0.05\n[collectors]\nnvml = true\nlog_files = ["{log}"]\n')
    cfg = parse_config(cfgfile.read_text(), str(cfgfile), **DEFAULTS)
    store = open_store(db)  # migrated before the daemon opens it
    daemon = Daemon(cfg, log=lambda line: None)
    t = threading.Thread(target=daemon.run)
    t.start()
    try:
        with log.open("a") as f:
            f.write("0.00.000.002 I srv  load: second line <script>\n")
        for _ in range(200):
            raws = [r["raw"] for r in store.db.query("select raw from log_lines order by id")] \
                if "log_lines" in store.db.table_names() else []
            if len(raws) == 2:
                break
            threading.Event().wait(0.05)
    finally:
        daemon.request_stop()
        t.join(10)
    assert raws == ["0.00.000.001 I srv  load: first line", "0.00.000.002 I srv  load: second line <script>"]
    s = daemon_status(store)
    nvml = s["daemon"]["collectors"]["nvml"]
    assert nvml["state"] == "unavailable" and "NVML" in nvml["reason"]
    notes = [r["note"] for r in store.db.query("select note from memory_samples")]
    assert any("not measured (no NVIDIA driver)" in (n or "") for n in notes)
