"""Does the harness add measurable overhead? Runner vs a bare httpx loop.

Starts a real llama-server (router mode, tiny models), then alternates
blocks of requests sent through cardproof's runner (campaign, backend,
SQLite writes, progress lines) and through a bare httpx streaming loop with
the same request body. Prints the median wall time per request of each and
their ratio (goal <= 1.05), and checks that every stored decode tok/s equals
the server's own print_timing line for that request.

Then a load step of 8 streams through cardproof's sweep: the client's own
CPU time per request (stream threads sending and reading, the writer
storing) as a share of the request's end-to-end time (goal < 5 %). CPU
time is the time not spent waiting on the socket. The load average is
printed beside the figures: on a busy machine they say little.

``--profile`` prints where one runner block's time goes (cProfile), the
socket waits left out.

    python bench/runner_overhead.py [--blocks 4] [--per-block 10] [--streams 8] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import threading
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from cardproof.daemon import llamacpp
from cardproof.daemon.backends.http import sse_payloads
from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.logtimings import print_timings
from cardproof.daemon.prompts import build_prompt, new_nonce
from cardproof.daemon.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.tinymodels import DRAFT_FOR, make_tiny

MODEL = "tiny-b"
MAX_TOKENS = 32


def bare_loop(url: str, n: int) -> list[float]:
    times = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(n):
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": build_prompt(40, new_nonce())}],
                "max_tokens": MAX_TOKENS,
                "stream": True,
                "cache_prompt": False,
                "chat_template_kwargs": {"enable_thinking": False},
                "stream_options": {"include_usage": True},
            }
            t0 = time.perf_counter()
            with client.stream("POST", "/v1/chat/completions", json=body, headers={"Connection": "close"}) as r:
                # the runner's own event reader: lines end only at CR/LF, not at U+2028 inside an answer
                for data in sse_payloads(r):
                    if data.strip() != "[DONE]":
                        json.loads(data)
            times.append(time.perf_counter() - t0)
    return times


def runner_block(url: str, store, n: int) -> list[float]:
    text = f"""
[campaign]
name = "bench"
prompt_classes = ["short"]
repetitions = {n}
max_tokens = {MAX_TOKENS}
[server]
url = "{url}"
[[models]]
name = "{MODEL}"
"""
    marks: list[float] = []

    def echo(line: str) -> None:
        if line.startswith("["):
            marks.append(time.perf_counter())

    # the first request's interval starts after the (already-loaded) model check
    start = [0.0]

    def echo_first(line: str) -> None:
        if line.startswith("load ") or line.startswith("run "):
            start[0] = time.perf_counter()
        echo(line)

    run_campaign(store, parse_campaign(text, "bench.toml"), echo=echo_first)
    points = [start[0]] + marks
    return [b - a for a, b in zip(points, points[1:])]


def profile_block(url: str, store, n: int) -> str:
    """cProfile of one runner block: the functions with the most own time, socket waits left out."""
    prof = cProfile.Profile()
    prof.enable()
    runner_block(url, store, n)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    waits = [k for k in stats.stats if k[2] in ("<method 'recv' of '_socket.socket' objects>",
                                                "<method 'recv_into' of '_socket.socket' objects>")]
    for k in waits:  # time blocked on the server is not the runner's
        del stats.stats[k]
    stats.sort_stats("tottime").print_stats(25)
    return out.getvalue()


def stream_overhead(url: str, store, streams: int, per_stream: int) -> dict:
    """A load step of ``streams`` streams through cardproof's sweep, with the client's CPU time per request.

    ``sampling.send`` (a stream thread: build, send, read, check, JSON) and
    ``store_request`` (the writer) are wrapped to add up the thread CPU
    time each spends: what the client costs beyond waiting on the socket.
    """
    from cardproof.daemon.load import sweep

    cpu: list[float] = []
    lock = threading.Lock()
    send, store_request = sweep.send, sweep.store_request

    def timed(fn):
        def wrapper(*a, **kw):
            t0 = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                with lock:
                    cpu.append(time.thread_time() - t0)
        return wrapper

    sweep.send, sweep.store_request = timed(send), timed(store_request)
    text = f"""
[campaign]
name = "bench-streams"
prompt_classes = ["short"]
repetitions = 1
max_tokens = {MAX_TOKENS}
[server]
url = "{url}"
[[models]]
name = "{MODEL}"
[load]
streams = [{streams}]
requests_per_stream = {per_stream}
"""
    try:
        out = run_campaign(store, parse_campaign(text, "bench-streams.toml"), echo=lambda s: None)
    finally:
        sweep.send, sweep.store_request = send, store_request
    walls = [r[0] for r in store.db.execute(
        "select s.wall_ms from samples s join load_steps st on st.cell_id = s.cell_id "
        "where st.run_id = ? and s.error_kind is null", [out.run_id])]
    n = len(walls)
    client_ms = sum(cpu) * 1000.0 / max(n, 1)
    return {"n": n, "client_ms": client_ms, "e2e_ms": statistics.median(walls) if walls else float("nan")}


def load_average() -> str:
    return "load average {:.2f} {:.2f} {:.2f} on {} CPUs".format(*os.getloadavg(), os.cpu_count())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--per-block", type=int, default=10)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--profile", action="store_true", help="print where one runner block's time goes")
    args = ap.parse_args()
    print(f"before: {load_average()}")
    work = Path(tempfile.mkdtemp(prefix="cardproof-bench-"))
    models = make_tiny(work / "models")
    preset = llamacpp.write_preset(
        work / "models.ini",
        {k: v for k, v in models.items() if k not in DRAFT_FOR.values()},
        {t: models[d] for t, d in DRAFT_FOR.items()},
    )
    server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=work / "server.log").start()
    try:
        httpx.post(server.url + "/models/load", json={"model": MODEL}, timeout=60)
        bare_loop(server.url, 3)  # warm-up, not counted
        store = open_store(work / "bench.db")
        runner_t, bare_t = [], []
        for b in range(args.blocks):
            runner_t += runner_block(server.url, store, args.per_block)
            bare_t += bare_loop(server.url, args.per_block)
            print(f"block {b + 1}/{args.blocks}: runner {len(runner_t)} requests, bare {len(bare_t)} requests", file=sys.stderr)
        time.sleep(0.5)
        logged = print_timings(server.log_path.read_text(errors="replace"))
        stored = [r[0] for r in store.db.execute("select decode_tps from samples order by id")]
        streamed = stream_overhead(server.url, store, args.streams, 4)
        profile = profile_block(server.url, store, args.per_block) if args.profile else None
    finally:
        server.stop()
    # the log holds warm-up, runner and bare requests interleaved in blocks; pick the runner ones
    per = args.per_block
    runner_logged = []
    idx = 3  # skip warm-up
    for _ in range(args.blocks):
        runner_logged += logged[idx: idx + per]
        idx += 2 * per
    mismatches = sum(1 for s, lg in zip(stored, runner_logged) if abs(s - lg["eval"][2]) > 0.006)
    r_med, b_med = statistics.median(runner_t), statistics.median(bare_t)
    ratio = r_med / b_med
    print(f"runner: median {r_med * 1000:.2f} ms per request (n={len(runner_t)})")
    print(f"bare httpx: median {b_med * 1000:.2f} ms per request (n={len(bare_t)})")
    print(f"ratio runner/bare: {ratio:.3f} (goal <= 1.05) -> {'OK' if ratio <= 1.05 else 'OVER'}")
    print(f"stored decode tok/s equal to the server's print_timing: {len(stored) - mismatches}/{len(stored)}")
    share = streamed["client_ms"] / streamed["e2e_ms"]
    print(f"{args.streams} streams: client CPU {streamed['client_ms']:.2f} ms per request, median request "
          f"{streamed['e2e_ms']:.1f} ms end to end (n={streamed['n']}): {share:.1%} (goal < 5 %) -> "
          f"{'OK' if share < 0.05 else 'OVER'}")
    print(f"after: {load_average()}")
    if profile:
        print(profile)
    return 0 if mismatches == 0 and len(stored) == len(runner_logged) else 1


if __name__ == "__main__":
    sys.exit(main())
