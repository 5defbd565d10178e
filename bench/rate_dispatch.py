"""Does cardproof's open-loop rate generator send on time? Its lateness against a bare generator's.

Starts a real llama-server (``--parallel 4``, one tiny model), then runs
rounds of two arms on the same seeded Poisson schedule: cardproof's rate
step (``[load] rates``, through the runner, storing every request in
SQLite) and a bare generator (one thread per arrival that sleeps until its
time and sends the same streaming request with httpx, storing nothing).
The order alternates each round, so a drift of the machine's load falls on
both. Per arm it prints how late requests went out against their planned
time (p50/p99, ms), the rate actually sent against the schedule's own rate,
and the ratio cardproof/bare of the median lateness; the load average
beside them (on a busy machine absolute figures say little).

    python bench/rate_dispatch.py [--rounds 3] [--rate 20] [--requests 100] [--max-tokens 16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.campaign.arrivals import poisson_schedule
from cardproof.daemon.server.prompts import build_prompt, new_nonce
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.server.tinymodels import make_tiny

MODEL = "tiny-a"
SEED = 5

CAMPAIGN = """
[campaign]
name = "rate-bench"
prompt_classes = ["short"]
repetitions = 1
max_tokens = {max_tokens}
[server]
url = "{url}"
[[models]]
name = "{model}"
[load]
rates = [{rate}]
requests_per_rate = {n}
seed = {seed}
"""


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def quantile(values: list[float], q: float) -> float:
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def sent_rate(sent: list[float]) -> float:
    sent = sorted(sent)
    return (len(sent) - 1) / (sent[-1] - sent[0])


def cardproof_arm(url: str, work: Path, i: int, args) -> tuple[list[float], list[float]]:
    """Lateness (s) and send times (s) of one rate step through the runner, read back from SQLite."""
    store = open_store(work / f"arm-{i}.db")
    text = CAMPAIGN.format(url=url, model=MODEL, rate=args.rate, n=args.requests, seed=SEED,
                           max_tokens=args.max_tokens)
    run_id = run_campaign(store, parse_campaign(text, "bench.toml"), echo=lambda s: None).run_id
    rows = store.db.execute(
        "select ls.sent_s, ls.scheduled_s from load_samples ls join load_steps st on st.id = ls.step_id "
        "where st.run_id = ?", [run_id]).fetchall()
    store.close()
    return [s - p for s, p in rows], [s for s, _ in rows]


def bare_arm(url: str, args) -> tuple[list[float], list[float]]:
    """Lateness (s) and send times (s) of the same schedule sent by a bare thread-per-arrival loop."""
    schedule = poisson_schedule(args.rate, SEED, count=args.requests)
    late: list[float] = []
    sent: list[float] = []
    lock = threading.Lock()
    client = httpx.Client(base_url=url, timeout=120,
                          limits=httpx.Limits(max_connections=args.requests, max_keepalive_connections=args.requests))

    def one(due: float) -> None:
        at = time.perf_counter() - t0
        with lock:
            late.append(at - due)
            sent.append(at)
        body = {"model": MODEL, "messages": [{"role": "user", "content": build_prompt(40, new_nonce())}],
                "max_tokens": args.max_tokens, "stream": True, "cache_prompt": False}
        with client.stream("POST", "/v1/chat/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and line[6:].strip() != "[DONE]":
                    json.loads(line[6:])

    threads = []
    t0 = time.perf_counter()
    for due in schedule:
        wait = t0 + due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        t = threading.Thread(target=one, args=(due,), daemon=True)
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    client.close()
    return late, sent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20.0, help="offered requests per second")
    ap.add_argument("--requests", type=int, default=100, help="requests per arm and round")
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    print(f"before: {load_average()}")
    work = Path(tempfile.mkdtemp(prefix="cardproof-rate-bench-"))
    model = make_tiny(work / "models")[MODEL]
    server = llamacpp.LlamaServerProcess(
        ["-m", str(model), "--parallel", "4", "--ctx-size", "4096", "--threads", "2", "--no-webui"],
        log_path=work / "server.log").start()
    plan = poisson_schedule(args.rate, SEED, count=args.requests)
    arms: dict[str, list[float]] = {"cardproof": [], "bare": []}
    try:
        for i in range(args.rounds):
            order = ("cardproof", "bare") if i % 2 == 0 else ("bare", "cardproof")
            line = []
            for arm in order:
                late, sent = cardproof_arm(server.url, work, i, args) if arm == "cardproof" else \
                    bare_arm(server.url, args)
                arms[arm] += late
                line.append(f"{arm} late p50 {1000 * statistics.median(late):.2f} ms, p99 "
                            f"{1000 * quantile(late, 0.99):.2f} ms, sent {sent_rate(sent):.2f}/s")
            print(f"round {i + 1}: " + "; ".join(line) + f"  ({load_average()})")
    finally:
        server.stop()
    print(f"schedule: {args.requests} arrivals at {args.rate:g}/s offered, the plan's own rate "
          f"{sent_rate(plan):.2f}/s (seed {SEED})")
    for arm, late in arms.items():
        print(f"{arm:>9}: late p50 {1000 * statistics.median(late):.2f} ms, p90 {1000 * quantile(late, 0.9):.2f} ms, "
              f"p99 {1000 * quantile(late, 0.99):.2f} ms over {len(late)} requests")
    c, b = statistics.median(arms["cardproof"]), statistics.median(arms["bare"])
    gap_ms = 1000 / args.rate
    print(f"median lateness cardproof/bare {c / b:.2f} ({1000 * c:.2f} vs {1000 * b:.2f} ms; "
          f"mean gap between arrivals {gap_ms:.1f} ms: cardproof's median lateness is "
          f"{100 * c * 1000 / gap_ms:.1f} % of it)")
    print(f"after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
