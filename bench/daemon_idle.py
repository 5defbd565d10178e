"""What does the daemon cost? Idle CPU, and decode tok/s with collectors on vs off.

1. Idle: starts ``cardproof daemon run`` with every collector the config can
   ask for (1 Hz memory sampler, the server's log file to tail, the metrics
   endpoint), waits until it is ready, then reads its CPU time from
   /proc/PID/stat over ``--idle-s`` seconds. Goal: < 1 % of one core, i.e.
   < 36 CPU seconds per hour.
2. A/B with an A/A control: a real llama-server (router mode, tiny models);
   blocks rotate between a daemon with the collectors on (A), one with them
   off (B) and a second one with them off (B'), in a rotating order per
   round. Each block queues the same campaign, lets that daemon run it, and
   stops the daemon. Printed: the median decode tok/s (server counters) of A
   over B with a bootstrap 95 % interval, and B' over B -- the noise floor of
   this machine measured in the same run. Goal: A/B within 1 %; a claim is
   only as good as the A/A ratio and the interval allow.
   ``--pin-cores`` puts the server on the last CPU and the daemons on the
   others, as on a GPU machine where decoding does not share the CPU with the
   collectors (on a 2-core machine a CPU-bound tiny model otherwise competes
   with everything else, the bench harness included).

Which collectors actually ran is printed from the daemon's own state row: a
collector the config asks for but no module provides shows as unavailable.

    python bench/daemon_idle.py [--idle-s 30] [--rounds 3] [--per-block 10] [--pin-cores]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cardproof.daemon.server import llamacpp
from cardproof.daemon.server.tinymodels import DRAFT_FOR, make_tiny

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


DAEMON_CPUS: set[int] | None = None  # --pin-cores: where daemons run


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


MAX_TOKENS = 128  # --max-tokens: longer decodes average out scheduling jitter within a sample


def campaign_text(url: str, n: int) -> str:
    return (f'[campaign]\nname = "ab"\nprompt_classes = ["short"]\nreasoning = [false]\nrepetitions = {n}\n'
            f'max_tokens = {MAX_TOKENS}\n\n[server]\nbackend = "llama-server"\nurl = "{url}"\n\n[[models]]\nname = "{MODEL}"\n')


ARMS = ("on", "off", "off2")  # off2: a second "off" arm, the A/A control


def ab_blocks(work: Path, server, rounds: int, per_block: int) -> dict[str, list[float]]:
    db = work / "ab.db"
    configs = {
        "on": write_config(work, "on", db, collectors=True, server_log=server.log_path),
        "off": write_config(work, "off", db, collectors=False, server_log=server.log_path),
        "off2": write_config(work, "off2", db, collectors=False, server_log=server.log_path),
    }
    camp = work / "ab.toml"
    camp.write_text(campaign_text(server.url, per_block))
    tps: dict[str, list[float]] = {a: [] for a in ARMS}
    seen: dict[str, dict] = {}
    order = [ARMS[(r + k) % len(ARMS)] for r in range(rounds) for k in range(len(ARMS))]  # rotating order
    for i, which in enumerate(order):
        subprocess.run([sys.executable, "-m", "cardproof.cli", "queue", "add", str(camp), "--db", str(db)],
                       check=True, capture_output=True)
        proc = start_daemon(configs[which], work)
        if DAEMON_CPUS:
            os.sched_setaffinity(proc.pid, DAEMON_CPUS)
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
        print(f"block {i + 1}/{len(order)} collectors {which:<4}: run {q[1]} {q[0]}, "
              f"median decode {statistics.median(values):.1f} tok/s (n={len(values)})", file=sys.stderr)
    for which, st in seen.items():
        print(f"collectors {which}: " + ", ".join(f"{k} {v.get('state')}" for k, v in st.items()), file=sys.stderr)
    return tps


def ratio_interval(a: list[float], b: list[float], n: int = 2000, seed: int = 7) -> tuple[float, float]:
    """Bootstrap 95 % interval of median(a) / median(b), resampling each arm."""
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
                    for _ in range(n))
    return ratios[int(0.025 * n)], ratios[int(0.975 * n) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle-s", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three arms (on, off, off2)")
    ap.add_argument("--per-block", type=int, default=10)
    ap.add_argument("--pin-cores", action="store_true", help="server on the last CPU, daemons on the others")
    ap.add_argument("--max-tokens", type=int, default=128, help="tokens decoded per sample")
    args = ap.parse_args()
    global DAEMON_CPUS, MAX_TOKENS
    MAX_TOKENS = args.max_tokens
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin_cores and len(cpus) < 2:
        raise SystemExit("--pin-cores needs at least two CPUs")
    with tempfile.TemporaryDirectory(prefix="cardproof-daemon-bench-") as tmp:
        work = Path(tmp)
        os.environ["CARDPROOF_HOME"] = str(work / "home")
        models = make_tiny(work / "models")
        preset = llamacpp.write_preset(
            work / "models.ini", {n: p for n, p in models.items() if n not in DRAFT_FOR.values()},
            {t: models[d] for t, d in DRAFT_FOR.items()})
        with llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=work / "server.log") as server:
            if args.pin_cores:  # children the router spawns later inherit the set
                os.sched_setaffinity(server.proc.pid, {cpus[-1]})
                DAEMON_CPUS = set(cpus[:-1])
                print(f"pinned: server on CPU {cpus[-1]}, daemons on {sorted(DAEMON_CPUS)}", file=sys.stderr)
            per_hour, collectors = idle_cpu(work, server.log_path, args.idle_s)
            print("idle collectors: " + ", ".join(f"{k} {v.get('state')}" for k, v in collectors.items()),
                  file=sys.stderr)
            tps = ab_blocks(work, server, args.rounds, args.per_block)
    med = {k: statistics.median(v) for k, v in tps.items()}
    print(f"idle daemon: {per_hour:.1f} CPU s per hour ({per_hour / 36:.2f} % of one core; goal < 1 %)")
    for k, v in tps.items():
        print(f"decode median, collectors {k:<4}: {med[k]:.1f} tok/s (range {min(v):.1f}–{max(v):.1f}, n={len(v)})")
    ab, aa = med["on"] / med["off"], med["off2"] / med["off"]
    ab_lo, ab_hi = ratio_interval(tps["on"], tps["off"])
    aa_lo, aa_hi = ratio_interval(tps["off2"], tps["off"])
    print(f"A/B on/off: {ab:.3f} (95 % interval {ab_lo:.3f}–{ab_hi:.3f}); "
          f"A/A off2/off: {aa:.3f} ({aa_lo:.3f}–{aa_hi:.3f})")
    met = abs(ab - 1) < 0.01 and ab_lo > 0.99 and ab_hi < 1.01
    print("goal (collectors change median decode by < 1 %): " + (
        "met" if met else "not shown -- " + (
            f"the A/A control (two identical arms) already spans {aa_lo:.3f}–{aa_hi:.3f}: this machine's own "
            "noise is larger than the 1 % effect sought" if abs(aa - 1) >= 0.01 or (aa_hi - aa_lo) > 0.02
            else "the A/B interval is wider than 1 %")))


if __name__ == "__main__":
    main()
