"""Does the harness add measurable overhead? Runner vs a bare httpx loop.

Starts a real llama-server (router mode, tiny models), then runs rounds of
three blocks: one through cardproof's runner (campaign, backend, SQLite
writes, progress lines) and two through a bare httpx streaming loop with
the same request body, the order rotated each round so that a drift of the
machine's load falls on every arm. Prints the median wall time per request
of each, the ratio runner/bare (goal <= 1.05) with a 95 % bootstrap
interval, the same for bare/bare (an A/A control: the noise floor of this
run on this machine), each round's ratio, and checks that every stored
decode tok/s equals the server's own print_timing line for that request.

Then a load step of 8 streams through cardproof's sweep: the client's own
CPU time per request (stream threads sending and reading, the writer
storing) as a share of the request's end-to-end time (goal < 5 %). CPU
time is the time not spent waiting on the socket. The load average is
printed beside the figures: on a busy machine they say little.

The server runs on CPUs of its own and the clients (runner, bare loop) on
the one left (``bench/cores.py``; ``--shared-cores`` lets them share, as
this bench did before): a client's CPU on a server core stalls llama.cpp's
compute threads, which wait for each other, and that is the machine's cost,
not the runner's.

Every answer is exactly ``MAX_TOKENS`` long in both arms (llama-server's
``ignore_eos``, ``bench/fixed_length.py``): the tiny models' answers
otherwise stop anywhere from 2 to 32 tokens, and that spread, not the
runner, decided most rounds.

``--phases`` prints each phase of a runner request (prompt, load watcher,
stream, counters, JSON, insert and commit, progress line, ...) in ms per
request (``bench/request_phases.py``); ``--profile`` prints where one
runner block's time goes (cProfile), the socket waits left out. ``--dump
FILE`` writes the shape of the stored sample and gate rows
(``bench/store_shape.py``): the same before and after a change of the
runner's per-request path, or something stored was dropped.

    python bench/runner_overhead.py [--rounds 6] [--per-block 8] [--streams 8] [--phases] [--profile]
                                    [--dump FILE] [--shared-cores]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import threading
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from cardproof.daemon.server import llamacpp
from cardproof.daemon.backends.http import sse_payloads
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.timings import print_timings
from cardproof.daemon.server.prompts import build_prompt, new_nonce
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.server.tinymodels import DRAFT_FOR, make_tiny

sys.path.insert(0, str(Path(__file__).parent))  # the bench's own helpers beside it
import cores as core_split  # noqa: E402
from fixed_length import EXTRA as FIXED_LENGTH, fixed_length  # noqa: E402
from store_shape import store_shape  # noqa: E402

MODEL = "tiny-b"
MAX_TOKENS = 32


def bare_loop(url: str, n: int) -> tuple[list[float], list[float]]:
    """Wall and process CPU seconds of each of ``n`` requests sent with nothing but httpx and the event reader."""
    times, cpus = [], []
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
                **FIXED_LENGTH,  # every answer max_tokens long, as the runner's under fixed_length()
            }
            t0, c0 = time.perf_counter(), time.process_time()
            with client.stream("POST", "/v1/chat/completions", json=body, headers={"Connection": "close"}) as r:
                # the runner's own event reader: lines end only at CR/LF, not at U+2028 inside an answer
                for data in sse_payloads(r):
                    if data.strip() != "[DONE]":
                        json.loads(data)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    return times, cpus


BLOCK = """
[campaign]
name = "bench"
prompt_classes = ["short"]
repetitions = {n}
max_tokens = {max_tokens}
[server]
url = "{url}"
[[models]]
name = "{model}"
"""


def runner_block(url: str, store, n: int) -> tuple[list[float], list[float]]:
    """Wall and process CPU seconds between the runner's progress lines: one interval per request."""
    text = BLOCK.format(n=n, url=url, model=MODEL, max_tokens=MAX_TOKENS)
    marks: list[tuple[float, float]] = []

    def echo(line: str) -> None:
        if line.startswith("["):
            marks.append((time.perf_counter(), time.process_time()))

    # the first request's interval starts at the last line before it (the model check); the lines after the
    # last request ("run N completed") must not move it, or the first interval comes out negative
    start = [(0.0, 0.0)]

    def echo_first(line: str) -> None:
        if not marks and not line.startswith("["):
            start[0] = (time.perf_counter(), time.process_time())
        echo(line)

    run_campaign(store, parse_campaign(text, "bench.toml"), echo=echo_first)
    points = start + marks
    return ([b[0] - a[0] for a, b in zip(points, points[1:])],
            [b[1] - a[1] for a, b in zip(points, points[1:])])


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


def stream_overhead(models: dict, work: Path, store, streams: int, per_stream: int,
                    cores: core_split.CoreSplit) -> dict:
    """A load step of ``streams`` streams through cardproof's sweep, and what the client costs per request.

    The step runs against a server of its own with as many slots as
    streams (``--parallel``), so that no request waits in the server's queue
    and the request time is the server's work, not a multiple of it.
    ``sampling.send`` (a stream thread: build, send, read, check, JSON) and
    ``store_request`` (the writer) are wrapped: their thread CPU time is the
    client's own cost (a lower bound: waits for the GIL are not CPU), and a
    stream's wall time minus its time blocked in socket reads and writes is
    the time not spent waiting on the socket (an upper bound: it also holds
    the GIL waits and the scheduler's delays of a busy machine).
    """
    import httpcore._backends.sync as sync_io

    from cardproof.daemon.run.load import sweep

    cpu_s = [0.0]
    send_wall_s = [0.0]
    socket_s = [0.0]
    lock = threading.Lock()
    local = threading.local()
    send, store_request = sweep.send, sweep.store_request
    read, write = sync_io.SyncStream.read, sync_io.SyncStream.write

    def on_socket(fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                local.socket_s = getattr(local, "socket_s", 0.0) + time.perf_counter() - t0
        return wrapper

    def timed_send(*a, **kw):
        local.socket_s = 0.0
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return send(*a, **kw)
        finally:
            with lock:
                cpu_s[0] += time.thread_time() - c0
                send_wall_s[0] += time.perf_counter() - t0
                socket_s[0] += local.socket_s

    def timed_store(*a, **kw):
        c0 = time.thread_time()
        try:
            return store_request(*a, **kw)
        finally:
            with lock:
                cpu_s[0] += time.thread_time() - c0

    with core_split.server_start(cores):
        server = llamacpp.LlamaServerProcess(
            ["-m", str(models[MODEL]), "--alias", MODEL, "--parallel", str(streams), "--ctx-size", str(512 * streams),
             "--threads", str(cores.threads), "--no-webui"], log_path=work / "streams-server.log").start()
    text = f"""
[campaign]
name = "bench-streams"
prompt_classes = ["short"]
repetitions = 1
max_tokens = {MAX_TOKENS}
[server]
url = "{server.url}"
[[models]]
name = "{MODEL}"
[load]
streams = [{streams}]
requests_per_stream = {per_stream}
"""
    sweep.send, sweep.store_request = timed_send, timed_store
    sync_io.SyncStream.read, sync_io.SyncStream.write = on_socket(read), on_socket(write)
    try:
        out = run_campaign(store, parse_campaign(text, "bench-streams.toml"), echo=lambda s: None)
    finally:
        sweep.send, sweep.store_request = send, store_request
        sync_io.SyncStream.read, sync_io.SyncStream.write = read, write
        server.stop()
    walls = [r[0] for r in store.db.execute(
        "select s.wall_ms from samples s join load_steps st on st.cell_id = s.cell_id "
        "where st.run_id = ? and st.axis = 'load' and s.error_kind is null", [out.run_id])]
    n = max(len(walls), 1)
    return {"n": len(walls), "client_cpu_ms": cpu_s[0] * 1000.0 / n, "request_ms": send_wall_s[0] * 1000.0 / n,
            "not_socket_ms": (send_wall_s[0] - socket_s[0]) * 1000.0 / n,
            "e2e_ms": statistics.median(walls) if walls else float("nan")}


def load_average() -> str:
    return "load average {:.2f} {:.2f} {:.2f} on {} CPUs".format(*os.getloadavg(), os.cpu_count())


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if q != 0.5 else \
        statistics.median(values)


def bootstrap_ratio(num: list[float], den: list[float], *, q: float = 0.5, draws: int = 2000,
                    seed: int = 17) -> tuple[float, float]:
    """95 % interval of quantile q of num / the same of den, each resampled with replacement on its own."""
    rng = random.Random(seed)
    ratios = sorted(quantile(rng.choices(num, k=len(num)), q) / quantile(rng.choices(den, k=len(den)), q)
                    for _ in range(draws))
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def bootstrap_excess(own: list[float], own_ref: list[float], base: float, *, draws: int = 2000,
                     seed: int = 17) -> tuple[float, float]:
    """95 % interval of (base + median own - median own_ref) / base, each list resampled on its own."""
    rng = random.Random(seed)
    ratios = sorted((base + statistics.median(rng.choices(own, k=len(own)))
                     - statistics.median(rng.choices(own_ref, k=len(own_ref)))) / base for _ in range(draws))
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def logged_by_arm(logged: list[dict], order: list[tuple[str, int]], skip: int) -> dict[str, list[dict]]:
    """The log's print_timing lines of each arm, in sent order: the log holds ``skip`` warm-up requests,
    then each block's ``n`` requests in the order the blocks ran."""
    out: dict[str, list[dict]] = {}
    idx = skip
    for arm, n in order:
        out.setdefault(arm, []).extend(logged[idx: idx + n])
        idx += n
    return out


def server_seconds(logged: list[dict], order: list[tuple[str, int]], skip: int) -> dict[str, list[float]]:
    """Each arm's requests' own server time (prompt eval + eval ms of its print_timing lines), in sent order."""
    return {arm: [(lg["prompt"][0] + lg["eval"][0]) / 1000.0 for lg in lines]
            for arm, lines in logged_by_arm(logged, order, skip).items()}


def interleaved(url: str, store, rounds: int, per_block: int):
    """``rounds`` rounds of a runner block and two bare blocks (A/A control), the order rotated each round.

    Rotating spreads a drift of the machine's load over all three arms;
    returns the per-request wall and CPU seconds of each arm, the order of
    blocks sent (arm, requests) for matching the server's log, and each
    round's runner/bare ratio of block medians.
    """
    times: dict[str, list[float]] = {"runner": [], "bare": [], "bare2": []}
    cpus: dict[str, list[float]] = {"runner": [], "bare": [], "bare2": []}
    order: list[tuple[str, int]] = []
    per_round: list[float] = []
    arms = ["runner", "bare", "bare2"]
    for r in range(rounds):
        medians = {}
        for arm in arms[r % 3:] + arms[:r % 3]:
            got, cpu = runner_block(url, store, per_block) if arm == "runner" else bare_loop(url, per_block)
            times[arm] += got
            cpus[arm] += cpu
            medians[arm] = statistics.median(got)
            order.append((arm, per_block))
        per_round.append(medians["runner"] / statistics.median([medians["bare"], medians["bare2"]]))
        print(f"round {r + 1}/{rounds}: runner/bare {per_round[-1]:.3f}, bare2/bare "
              f"{medians['bare2'] / medians['bare']:.3f} ({load_average()})", file=sys.stderr)
    return times, cpus, order, per_round


def phases(url: str, store, n: int) -> str:
    """Each phase's milliseconds per request of one runner block (``bench/request_phases.py``)."""
    from request_phases import PhaseClock, phase_table

    echo_s = [0.0]
    clock = PhaseClock()
    sink = open(os.devnull, "w")  # noqa: SIM115 -- a real write per line, as the CLI's progress lines are

    def echo(line: str) -> None:
        t0 = time.perf_counter()
        print(line, file=sink, flush=True)
        echo_s[0] += time.perf_counter() - t0

    with clock.installed(), sink:
        t0, c0 = time.perf_counter(), time.thread_time()
        run_campaign(store, parse_campaign(BLOCK.format(n=n, url=url, model=MODEL, max_tokens=MAX_TOKENS),
                                           "bench.toml"), echo=echo)
        block_s, block_cpu_s = time.perf_counter() - t0, time.thread_time() - c0
    return f"one runner block of {n} requests, {block_s * 1000 / n:.2f} ms per request in all\n" + \
        phase_table(clock, n, block_s, echo_s[0], block_cpu_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6, help="rounds of runner, bare and bare2 blocks")
    ap.add_argument("--per-block", type=int, default=8)
    ap.add_argument("--streams", type=int, default=8, help="streams of the client-overhead step (0: skip it)")
    ap.add_argument("--profile", action="store_true", help="print where one runner block's time goes (cProfile)")
    ap.add_argument("--phases", action="store_true", help="print each phase's ms per request of one runner block")
    ap.add_argument("--dump", type=Path, help="write the shape of the stored sample and gate rows to this file")
    core_split.add_argument(ap)
    args = ap.parse_args()
    cores = core_split.split(args.shared_cores)
    print(f"before: {load_average()}; {cores.describe()}")
    work = Path(tempfile.mkdtemp(prefix="cardproof-bench-"))
    models = make_tiny(work / "models")
    preset = llamacpp.write_preset(
        work / "models.ini",
        {k: v for k, v in models.items() if k not in DRAFT_FOR.values()},
        {t: models[d] for t, d in DRAFT_FOR.items()},
    )
    with core_split.server_start(cores):  # the router's model processes inherit its CPUs
        server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset, threads=cores.threads),
                                             log_path=work / "server.log").start()
    try:
        with fixed_length():
            httpx.post(server.url + "/models/load", json={"model": MODEL}, timeout=60)
            bare_loop(server.url, 3)  # warm-up, not counted
            store = open_store(work / "bench.db")
            times, cpus, order, per_round = interleaved(server.url, store, args.rounds, args.per_block)
            time.sleep(0.5)
            logged = print_timings(server.log_path.read_text(errors="replace"))
            stored = [r[0] for r in store.db.execute("select decode_tps from samples order by id")]
            if args.dump:
                args.dump.write_text(json.dumps(store_shape(store.db.conn), indent=1, sort_keys=True) + "\n")
            streamed = stream_overhead(models, work, store, args.streams, 4, cores) if args.streams else None
            phase_text = phases(server.url, store, args.per_block) if args.phases else None
            profile = profile_block(server.url, store, args.per_block) if args.profile else None
    finally:
        server.stop()
    runner_logged = logged_by_arm(logged, order, 3).get("runner", [])  # after the 3 warm-up requests
    mismatches = sum(1 for s, lg in zip(stored, runner_logged) if abs(s - lg["eval"][2]) > 0.006)
    r_med, b_med = statistics.median(times["runner"]), statistics.median(times["bare"] + times["bare2"])
    ratio = r_med / b_med
    lo, hi = bootstrap_ratio(times["runner"], times["bare"] + times["bare2"])
    aa = statistics.median(times["bare2"]) / statistics.median(times["bare"])
    aa_lo, aa_hi = bootstrap_ratio(times["bare2"], times["bare"])
    print(f"runner: median {r_med * 1000:.2f} ms per request (n={len(times['runner'])})")
    print(f"bare httpx: median {b_med * 1000:.2f} ms per request (n={len(times['bare']) + len(times['bare2'])})")
    print(f"ratio runner/bare: {ratio:.3f} [95 % bootstrap {lo:.3f}-{hi:.3f}] (goal <= 1.05) -> "
          f"{'OK' if ratio <= 1.05 else 'OVER'}")
    # on a shared machine most requests wait for a CPU; the fastest tenth are the ones least disturbed
    p10 = quantile(times["runner"], 0.1) / quantile(times["bare"] + times["bare2"], 0.1)
    p10_lo, p10_hi = bootstrap_ratio(times["runner"], times["bare"] + times["bare2"], q=0.1)
    print(f"ratio runner/bare of the fastest tenth (p10): {p10:.3f} [95 % bootstrap {p10_lo:.3f}-{p10_hi:.3f}] "
          f"({quantile(times['runner'], 0.1) * 1000:.2f} vs {quantile(times['bare'] + times['bare2'], 0.1) * 1000:.2f} ms)")
    print(f"A/A control bare2/bare: {aa:.3f} [95 % bootstrap {aa_lo:.3f}-{aa_hi:.3f}]: the noise floor of this run")
    # the server's own time per request (its print_timing lines) moves with the machine from block to block;
    # what a client adds is the rest of the request's wall time, compared here on the bare request's median
    served = server_seconds(logged, order, 3)
    own = {arm: [w - sv for w, sv in zip(times[arm], served.get(arm, []))] for arm in times}
    own_bare = own["bare"] + own["bare2"]
    adj = (b_med + statistics.median(own["runner"]) - statistics.median(own_bare)) / b_med
    adj_lo, adj_hi = bootstrap_excess(own["runner"], own_bare, b_med)
    bare_med = statistics.median(times["bare"])
    adj_aa = (bare_med + statistics.median(own["bare2"]) - statistics.median(own["bare"])) / bare_med
    aa2_lo, aa2_hi = bootstrap_excess(own["bare2"], own["bare"], bare_med)
    served_all = served.get("runner", []) + served.get("bare", []) + served.get("bare2", [])
    print(f"server's own time per request (prompt + eval of its log): median {statistics.median(served_all) * 1000:.2f}"
          f" ms, p10-p90 {quantile(served_all, 0.1) * 1000:.2f}-{quantile(served_all, 0.9) * 1000:.2f} ms")
    print(f"client time outside the server's work (wall - server): runner {statistics.median(own['runner']) * 1000:.2f}"
          f" ms, bare {statistics.median(own_bare) * 1000:.2f} ms per request")
    print(f"ratio runner/bare with the server's own time taken out: {adj:.3f} [95 % bootstrap {adj_lo:.3f}-{adj_hi:.3f}]"
          f" (goal <= 1.05) -> {'OK' if adj <= 1.05 else 'OVER'}; A/A the same way {adj_aa:.3f} "
          f"[{aa2_lo:.3f}-{aa2_hi:.3f}]")
    print(f"per round runner/bare: {' '.join(f'{x:.3f}' for x in per_round)}; median {statistics.median(per_round):.3f},"
          f" {sum(x <= 1.05 for x in per_round)}/{len(per_round)} rounds <= 1.05")
    r_cpu, b_cpu = statistics.median(cpus["runner"]), statistics.median(cpus["bare"] + cpus["bare2"])
    # CPU time hardly depends on how busy the machine is: the runner's own cost even where wall times are noise
    print(f"client CPU per request: runner {r_cpu * 1000:.2f} ms, bare {b_cpu * 1000:.2f} ms: the runner's own "
          f"{(r_cpu - b_cpu) * 1000:+.2f} ms ({(r_cpu - b_cpu) / b_med:+.1%} of a bare request's wall time)")
    print(f"stored decode tok/s equal to the server's print_timing: {len(stored) - mismatches}/{len(stored)}")
    if streamed:
        cpu_share = streamed["client_cpu_ms"] / streamed["request_ms"]
        wall_share = streamed["not_socket_ms"] / streamed["request_ms"]
        print(f"{args.streams} streams ({args.streams} server slots, n={streamed['n']}): mean request "
              f"{streamed['request_ms']:.1f} ms (median {streamed['e2e_ms']:.1f} ms); client CPU "
              f"{streamed['client_cpu_ms']:.2f} ms per request = {cpu_share:.1%} (goal < 5 %) -> "
              f"{'OK' if cpu_share < 0.05 else 'OVER'}; not waiting on the socket (CPU, GIL and scheduler waits) "
              f"{streamed['not_socket_ms']:.2f} ms = {wall_share:.1%}")
    print(f"after: {load_average()}")
    if phase_text:
        print(phase_text)
    if profile:
        print(profile)
    return 0 if mismatches == 0 and len(stored) == len(runner_logged) else 1


if __name__ == "__main__":
    sys.exit(main())
