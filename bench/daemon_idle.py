"""What does the daemon cost? Idle CPU, and decode tok/s with collectors on vs off.

1. Idle: starts ``cardproof daemon run`` with every collector the config can
   ask for (1 Hz memory sampler, the server's log file to tail, the metrics
   endpoint), waits until it is ready, then reads its CPU time from
   /proc/PID/stat over ``--idle-s`` seconds. Goal: < 1 % of one core, i.e.
   < 36 CPU seconds per hour.
2. A/B: a real llama-server (router mode, tiny models); blocks alternate
   between a daemon with the collectors on (A) and one with them off (B).
   Each block queues the same campaign, lets that daemon run it, and stops
   the daemon. The median decode tok/s (server counters) of A over B is
   printed; goal: within 1 %.

Which collectors actually ran is printed from the daemon's own state row: a
collector the config asks for but no module provides shows as unavailable.

    python bench/daemon_idle.py [--idle-s 30] [--blocks 6] [--per-block 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cardproof.daemon import llamacpp
from cardproof.daemon.tinymodels import DRAFT_FOR, make_tiny

MODEL = "tiny-b"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def write_config(work: Path, name: str, db: Path, *, collectors: bool, server_log: Path) -> Path:
    cfg = work / f"{name}.toml"
    lines = [
        "[daemon]", f'db = "{db}"', f'data_dir = "{work}"', "queue_poll_s = 0.5",
        "[collectors]", f"nvml = {str(collectors).lower()}", "sampler_interval_s = 1.0",
        f"log_files = {json.dumps([str(server_log)] if collectors else [])}",
        "[metrics]", f"enabled = {str(collectors).lower()}", "port = 0",
    ]
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def start_daemon(cfg: Path, work: Path) -> subprocess.Popen:
    log = (work / f"{cfg.stem}.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "cardproof.cli", "daemon", "run", "--config", str(cfg)],
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc


def wait_ready(db: Path, proc: subprocess.Popen, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"daemon exited with {proc.returncode}")
        if db.exists():
            conn = sqlite3.connect(db, timeout=5)
            try:
                row = conn.execute("select ready_at, collectors_json from daemon_state where pid = ? "
                                   "order by id desc limit 1", [proc.pid]).fetchone()
            except sqlite3.OperationalError:  # tables not migrated yet
                row = None
            finally:
                conn.close()
            if row and row[0]:
                return json.loads(row[1] or "{}")
        time.sleep(0.1)
    raise SystemExit("daemon not ready in time")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    if proc.wait(60) != 0:
        raise SystemExit(f"daemon exited with {proc.returncode} on SIGTERM")


def idle_cpu(work: Path, server_log: Path, idle_s: float) -> tuple[float, dict]:
    db = work / "idle.db"
    cfg = write_config(work, "idle", db, collectors=True, server_log=server_log)
    proc = start_daemon(cfg, work)
    try:
        collectors = wait_ready(db, proc)
        time.sleep(2.0)  # past start-up work
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(idle_s)
        c1, t1 = cpu_seconds(proc.pid), time.monotonic()
    finally:
        stop(proc)
    return (c1 - c0) / (t1 - t0) * 3600.0, collectors


def campaign_text(url: str, n: int) -> str:
    return (f'[campaign]\nname = "ab"\nprompt_classes = ["short"]\nreasoning = [false]\nrepetitions = {n}\n'
            f'max_tokens = 32\n\n[server]\nbackend = "llama-server"\nurl = "{url}"\n\n[[models]]\nname = "{MODEL}"\n')


def ab_blocks(work: Path, server, blocks: int, per_block: int) -> dict[str, list[float]]:
    db = work / "ab.db"
    configs = {
        "on": write_config(work, "on", db, collectors=True, server_log=server.log_path),
        "off": write_config(work, "off", db, collectors=False, server_log=server.log_path),
    }
    camp = work / "ab.toml"
    camp.write_text(campaign_text(server.url, per_block))
    tps: dict[str, list[float]] = {"on": [], "off": []}
    seen: dict[str, dict] = {}
    for i in range(blocks):
        which = "on" if i % 2 == 0 else "off"
        subprocess.run([sys.executable, "-m", "cardproof.cli", "queue", "add", str(camp), "--db", str(db)],
                       check=True, capture_output=True)
        proc = start_daemon(configs[which], work)
        try:
            seen[which] = wait_ready(db, proc)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                conn = sqlite3.connect(db, timeout=5)
                q = conn.execute("select status, last_run_id from daemon_queue order by id desc limit 1").fetchone()
                conn.close()
                if q[0] not in ("queued", "running"):
                    break
                time.sleep(0.2)
        finally:
            stop(proc)
        conn = sqlite3.connect(db, timeout=5)
        values = [r[0] for r in conn.execute(
            "select decode_tps from samples where run_id = ? and decode_tps is not null", [q[1]])]
        conn.close()
        tps[which] += values
        print(f"block {i + 1}/{blocks} collectors {which:<3}: run {q[1]} {q[0]}, "
              f"median decode {statistics.median(values):.1f} tok/s (n={len(values)})", file=sys.stderr)
    for which, st in seen.items():
        print(f"collectors {which}: " + ", ".join(f"{k} {v.get('state')}" for k, v in st.items()), file=sys.stderr)
    return tps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle-s", type=float, default=30.0)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--per-block", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cardproof-daemon-bench-") as tmp:
        work = Path(tmp)
        os.environ["CARDPROOF_HOME"] = str(work / "home")
        models = make_tiny(work / "models")
        preset = llamacpp.write_preset(
            work / "models.ini", {n: p for n, p in models.items() if n not in DRAFT_FOR.values()},
            {t: models[d] for t, d in DRAFT_FOR.items()})
        with llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=work / "server.log") as server:
            per_hour, collectors = idle_cpu(work, server.log_path, args.idle_s)
            print("idle collectors: " + ", ".join(f"{k} {v.get('state')}" for k, v in collectors.items()),
                  file=sys.stderr)
            tps = ab_blocks(work, server, args.blocks, args.per_block)
    on, off = statistics.median(tps["on"]), statistics.median(tps["off"])
    print(f"idle daemon: {per_hour:.1f} CPU s per hour ({per_hour / 36:.2f} % of one core; goal < 1 %)")
    spread = {k: f"{min(v):.1f}–{max(v):.1f}" for k, v in tps.items()}
    print(f"decode median with collectors on {on:.1f} tok/s ({spread['on']}, n={len(tps['on'])}), "
          f"off {off:.1f} tok/s ({spread['off']}, n={len(tps['off'])}): ratio on/off {on / off:.3f} "
          f"(goal within 1 %; on a shared machine the spread says more than the ratio)")


if __name__ == "__main__":
    main()
