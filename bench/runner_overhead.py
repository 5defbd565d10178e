"""Does the harness add measurable overhead? Runner vs a bare httpx loop.

Starts a real llama-server (router mode, tiny models), then alternates
blocks of requests sent through cardproof's runner (campaign, backend,
SQLite writes, progress lines) and through a bare httpx streaming loop with
the same request body. Prints the median wall time per request of each and
their ratio (goal <= 1.05), and checks that every stored decode tok/s equals
the server's own print_timing line for that request.

    python bench/runner_overhead.py [--blocks 4] [--per-block 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from cardproof.daemon import llamacpp
from cardproof.daemon.backends.http import split_lines, sse_events
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
                # lines end only at CR/LF (SSE): iter_lines() also breaks at U+2028 inside an answer
                for _, data in sse_events(split_lines(r.iter_bytes())):
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--per-block", type=int, default=10)
    args = ap.parse_args()
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
    return 0 if mismatches == 0 and len(stored) == len(runner_logged) else 1


if __name__ == "__main__":
    sys.exit(main())
