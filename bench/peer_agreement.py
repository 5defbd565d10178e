"""Do cardproof's load figures agree with GuideLLM's on the same server? Side by side, with ratios.

Starts a real llama-server (one tiny model, tiny-b by default, ``--parallel
4``), then measures it at every step -- synchronous, and 1/2/4 concurrent
streams -- with the same prompts and answer length: once through
cardproof's ``[load]`` steps, once through GuideLLM, the order alternating
step by step. GuideLLM
is installed by this script from PyPI into a virtual environment of its own
(``~/.cache/cardproof/guidellm-venv``, or ``--venv``); it is never a
dependency of cardproof. It runs offline: its tokenizer is built from the
tiny model's GGUF vocabulary (``peer_guidellm.py``, ``peer_tokenizer.py``).

Printed per step: requests, prompt and output tokens (the server's counts
for cardproof, GuideLLM's for GuideLLM), mean request time and requests in
flight on average (where throughput differs at a similar median ITL, one of
these says why), aggregate output tok/s, median ITL
and TTFT of each -- medians of ``--repeat`` runs per tool, alternating,
with their min-max so that the machine's own noise is in view -- and the
ratio cardproof/GuideLLM. Goal: within 5 % on
aggregate throughput and median ITL at every step. The figures are taken
under one definition where the two tools allow it, and the line says which
definition still differs where they disagree:

* ITL: GuideLLM's is per request (last token's chunk - first token's
  chunk) / (output tokens - 1) -- not the end of the request: the stream's
  end after the last token is left out -- and its median is the value where
  the cumulative weight (tokens - 1) first reaches one half: of an even
  count of requests the lower middle one, not the mean of the two
  (``guidellm_median``; with the mean, cardproof's ITL read up to 2.5 %
  higher from that alone). Compared: cardproof's samples under that
  definition, the span from the stored gaps between its text chunks;
  cardproof's own ITL, the chunk gaps, is printed beside it, not held to
  the goal. TTFT and the server's ms/token take the same median.
* output tok/s: both output tokens over the step's wall time, from its
  first send to its last answer (GuideLLM: its measure window); GuideLLM's
  own ``successful.mean`` of the rate is printed beside it.
* answer length: GuideLLM asks for exactly ``output_tokens`` (``ignore_eos``
  with its synthetic data); cardproof's step asks the same
  (``bench/fixed_length.py``). Before, cardproof's answers stopped at the
  tiny model's end-of-sequence token, anywhere below max_tokens, and the
  two tools compared different work.
* requests in flight: each tool's client spends some time between one
  answer and its next send; with the tiny model's 64-token answers (30 ms)
  GuideLLM's few ms of it (on the clients' one CPU here) kept only 0.8 of 1
  requests in flight, and its throughput was lower by that idle share. The
  answers are 512 tokens by default so that the gap is a small part of a
  request; a step where a tool falls short of its streams says so.
* prompts: GuideLLM reads cardproof's own (``daemon/server/prompts.py``, a fresh
  nonce each) from a data file with the output count of each
  (``peer_guidellm.prompts_file``). Its synthetic text (``--synthetic``) is
  other words, and the server decoded it about 11 % slower per token than
  cardproof's filler (its own print_timing, same lengths): the tools then
  timed different work.
* model: tiny-b (about 2 ms a token here). tiny-a decodes a token in about
  0.35 ms, and at that pace the server's own work per streamed chunk and a
  client's gap between requests are a large share of what either tool times.
* TTFT: both from sending to the first text, queue included; not held to
  the goal.

The server runs on CPUs of its own, both clients on the one left
(``bench/cores.py``): GuideLLM's client (worker processes, its own event
loop) costs more CPU than cardproof's threads, and on a shared core that
CPU slowed the server during GuideLLM's runs only -- a difference of the
machine, not of the tools' definitions. ``--shared-cores`` lets them share.
The [min-max] of the repeats shows how far the machine itself moves the
figures; a ratio inside that spread says nothing about the tools.

    python bench/peer_agreement.py [--requests-per-stream 8] [--max-tokens 512] [--repeat 3] [--venv DIR]
                                   [--model tiny-b] [--synthetic] [--guidellm-version X]
                                   [--processor ID_OR_DIR] [--shared-cores]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.store.stats import run_steps
from cardproof.daemon.logs.timings import print_timings
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.server.tinymodels import TINY_MODELS, make_tiny

sys.path.insert(0, str(Path(__file__).parent))  # the bench's own helpers beside it
import cores as core_split  # noqa: E402
import peer_guidellm  # noqa: E402
from fixed_length import fixed_length  # noqa: E402

# tiny-b decodes at about 2 ms a token here, tiny-a at 0.35 ms: at tiny-a's pace a client's few ms
# between requests and the server's own work per streamed chunk are a large share of what is timed
MODEL = "tiny-b"
# (label, streams, GuideLLM profile): synchronous, then 1/2/4 concurrent streams
STEPS = (("sync", 1, "synchronous"), ("1", 1, "concurrent"), ("2", 2, "concurrent"), ("4", 4, "concurrent"))
STREAMS = tuple(sorted({s for _, s, _ in STEPS}))
PROMPT_TOKENS = 128
GOAL = 0.05
CTX_SIZE = 8192


def cardproof_step(url: str, db: Path, streams: int, per_stream: int, max_tokens: int, model: str = MODEL) -> dict:
    """One cardproof ``[load]`` step of ``streams`` streams, its figures under the names GuideLLM's are given.

    ``itl_ms``: the median gap between streamed chunks that carry text
    (cardproof's ITL); ``tpot_ms``: per request the span from its first
    text chunk to its last (the sum of the stored gaps) / (generated tokens
    - 1), its median weighted by tokens and taken as GuideLLM takes it.
    """
    text = f"""
[campaign]
name = "peer"
prompt_classes = ["peer"]
repetitions = 1
max_tokens = {max_tokens}
[prompts.peer]
target_tokens = {PROMPT_TOKENS}
[server]
url = "{url}"
[[models]]
name = "{model}"
[load]
streams = [{streams}]
requests_per_stream = {per_stream}
prompt_class = "peer"
max_tokens = {max_tokens}
"""
    store = open_store(db)
    try:
        with fixed_length():  # every answer max_tokens long, as GuideLLM asks for its synthetic output_tokens
            out = run_campaign(store, parse_campaign(text, "peer.toml"), echo=lambda s: None)
        (f,) = run_steps(store.db.conn, out.run_id, "load")
        wall_s = f.step.get("wall_s")
        rows = store.db.conn.execute(
            "select s.wall_ms, s.ttft_ms, s.generated_tokens, ls.itl_ms_json from samples s join load_samples ls "
            "on ls.sample_id = s.id where ls.step_id = ? and s.error_kind is null", [f.step["id"]]).fetchall()
    finally:
        store.close()
    tpot, weights = [], []
    for wall_ms, ttft_ms, n, gaps in rows:
        # GuideLLM's ITL: from the first chunk with text to the last, over the tokens after the first; the
        # stored gaps between text chunks add up to that span (the end of the stream after it is not in it)
        span = sum(json.loads(gaps)) if gaps else None
        if span is not None and n and n > 1:
            tpot.append(span / (n - 1))
            weights.append(n - 1)  # one value per token gap, as GuideLLM weighs them
    return {"output_tps": f.output_tps, "ttft_ms": guidellm_median([r[1] for r in rows if r[1] is not None]),
            "itl_ms": f.itl_ms.p50, "tpot_ms": guidellm_median(tpot, weights), "prompt_tokens": f.prompt_tokens.p50,
            "output_tokens": statistics.median([r[2] for r in rows if r[2] is not None]) if rows else None,
            "requests": len(rows),
            "e2e_ms": statistics.fmean([r[0] for r in rows if r[0] is not None]) if rows else None,
            # requests in flight on average: their summed time over the step's wall time
            "in_flight": (sum(r[0] for r in rows if r[0] is not None) / 1000.0 / wall_s) if rows and wall_s else None,
            "window_s": wall_s}


def guidellm_median(values: list[float], weights: list[float] | None = None) -> float | None:
    """A median as GuideLLM takes it (``Percentiles.from_pdf`` in guidellm/schemas/base/statistics.py):
    the values sorted, the first whose cumulative share of the weight reaches one half. Of an even count
    of equal weights that is the lower middle value, not the mean of the two middle ones -- with 8
    requests per step, up to 2.5 % below ``statistics.median`` in the runs here.
    """
    pairs = sorted(zip(values, weights if weights is not None else [1.0] * len(values)))
    total = sum(w for _, w in pairs)
    if not pairs or total <= 0:
        return None
    share = 0.0
    for value, weight in pairs:
        share += weight / total
        if share >= 0.5:
            return value
    return pairs[-1][0]


def step_timings(log: Path, start: int, max_tokens: int, last: int | None = None) -> list[dict]:
    """The print_timing lines of one tool's run (the log from ``start``): only answers of ``max_tokens``
    tokens (a cardproof gate's short one is left out), and of those the ``last`` ones -- the step's own
    requests, not the answer cardproof's campaign measures for its cell before the load step."""
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    lines = [t for t in print_timings(text) if t["eval"][1] == max_tokens]
    return lines[-last:] if last else lines


def server_tpot_ms(lines: list[dict]) -> float | None:
    """The server's own decode ms per token over one tool's run (its ``step_timings``).

    The same server and settings for both tools: where this differs between
    them as their ITL does, the server itself decoded slower for one of
    them (the text it was asked to continue, or the machine during that
    run), not the client's clock.
    """
    per_token = [t["eval"][0] / t["eval"][1] for t in lines]
    return guidellm_median(per_token)  # the same median as both tools' ITL


def server_busy(lines: list[dict], window_s: float | None, streams: int) -> float | None:
    """The share of a step's window in which the server worked on its requests, per stream: the sum of
    each request's own prompt and decode time (print_timing) over window x streams.

    A tool's aggregate tok/s is the server's pace times this share, so the
    share compares the clients with the pace taken out: one whose client
    waits between an answer and its next send, or starts late, leaves the
    server idle for a larger share.
    """
    if not lines or not window_s:
        return None
    return sum(t["prompt"][0] + t["eval"][0] for t in lines) / 1000.0 / (window_s * streams)


def _medians(figures: list[dict]) -> dict:
    """Each figure's median over the repeats, and its min-max as ``<key>_range``."""
    out: dict = {}
    for key in figures[0]:
        values = [f[key] for f in figures if f.get(key) is not None]
        out[key] = statistics.median(values) if values else None
        out[f"{key}_range"] = (min(values), max(values)) if values else None
    return out


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def paired(ours: list[dict], theirs: list[dict], key: str, other: str | None = None) -> tuple | None:
    """cardproof/GuideLLM of ``key`` (GuideLLM's ``other``) per repeat, the two runs of a repeat side by
    side in time: the median of those ratios and their min-max, or None.

    The server's own pace on a shared machine drifts by a quarter within
    minutes; a drift between repeats moves both runs of a pair alike, so the
    pairs' ratios hold still where a ratio of two medians taken at different
    times does not.
    """
    rs = [_ratio(a.get(key), b.get(other or key)) for a, b in zip(ours, theirs)]
    rs = [r for r in rs if r is not None]
    return (statistics.median(rs), min(rs), max(rs)) if rs else None


def _fmt(v, digits=1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


# (key, label, compared against the goal, what differs when they disagree)
ROWS = (
    ("output_tps", "output tok/s", True,
     "same definition (output tokens / the step's wall time from its first send to its last answer; cardproof "
     "counts the server's counters, GuideLLM its measure window): a difference beyond the [min-max] of the runs is "
     "the machine between runs, not the tools"),
    ("tpot_ms", "ITL p50 ms", True,
     "same definition ((last token's chunk - first token's chunk) / (tokens - 1) per request, GuideLLM's median "
     "over tokens, its inter_token_latency): a difference beside an equal 'ITL / server's' is the server's pace "
     "between runs, not the tools"),
    ("itl_ms", "chunk gap p50", False,
     "cardproof's own ITL: gaps between streamed chunks as read; on a busy client chunks are read in bursts, so "
     "gaps near 0 and stalls, not the server's pace"),
    ("ttft_ms", "TTFT p50 ms", False,
     "both from sending to the first text, queue included; the first token waits for the prompt's prefill and "
     "for the batch the server is decoding, so the step's arrival pattern (all streams sent at once by cardproof, "
     "GuideLLM's workers as they start) moves it"),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests-per-stream", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--model", default=MODEL, choices=[m.name for m in TINY_MODELS],
                    help=f"the tiny model both tools measure (default {MODEL})")
    ap.add_argument("--synthetic", action="store_true",
                    help="GuideLLM sends its own synthetic text instead of cardproof's prompts")
    ap.add_argument("--repeat", type=int, default=3,
                    help="times each tool measures each step, alternating (ABBA...); the ratios of the pairs "
                         "of runs made one after the other are compared by their median")
    ap.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "cardproof" / "guidellm-venv")
    ap.add_argument("--guidellm-version", default=None, help="a GuideLLM version from PyPI (default: the newest)")
    ap.add_argument("--processor", default=None,
                    help="the tokenizer GuideLLM sizes its prompts with (Hub id or folder; default: one built "
                         "from the tiny model's GGUF vocabulary, no Hub access needed)")
    core_split.add_argument(ap)
    args = ap.parse_args()
    cores = core_split.split(args.shared_cores)
    exe = peer_guidellm.guidellm_bin(args.venv, args.guidellm_version)
    work = Path(tempfile.mkdtemp(prefix="cardproof-peer-"))
    processor = args.processor or str(peer_guidellm.local_tokenizer(args.venv, args.model, CTX_SIZE,
                                                                    work / "tokenizer"))
    version = peer_guidellm.guidellm_version(args.venv)
    models = make_tiny(work / "models")
    load_before = os.getloadavg()[0]
    with core_split.server_start(cores):  # GuideLLM, started later, runs on the clients' CPUs
        server = llamacpp.LlamaServerProcess(
            ["-m", str(models[args.model]), "--alias", args.model, "--parallel", str(max(STREAMS)),
             "--ctx-size", str(CTX_SIZE),
             "--threads", str(cores.threads), "--no-webui"], log_path=work / "server.log").start()
    runs: dict[str, dict[str, list[dict]]] = {label: {"cardproof": [], "guidellm": []} for label, _, _ in STEPS}
    try:
        for i, (label, s, profile) in enumerate(STEPS):
            n = s * args.requests_per_stream
            # the order alternates (ABBA...), so a drift of the machine's load falls on both tools alike
            for r in range(args.repeat):
                for tool in (("cardproof", "guidellm") if (i + r) % 2 == 0 else ("guidellm", "cardproof")):
                    print(f"step {label} ({r + 1}/{args.repeat}): {tool} ...", file=sys.stderr)
                    mark = server.log_path.stat().st_size
                    if tool == "cardproof":  # one stream is cardproof's synchronous: it runs that step twice
                        fig = cardproof_step(server.url, work / "peer.db", s, args.requests_per_stream,
                                             args.max_tokens, args.model)
                    else:
                        prompts = None if args.synthetic else peer_guidellm.prompts_file(
                            work / f"prompts-{label}-{r}.jsonl", n, PROMPT_TOKENS, args.max_tokens)
                        spec = peer_guidellm.scenario(server.url, args.model, s, n, PROMPT_TOKENS, args.max_tokens,
                                                      processor, work / f"guidellm-{label}-{r}.json", profile=profile,
                                                      prompts=prompts)
                        fig = peer_guidellm.figures(peer_guidellm.run_step(exe, spec, f"{label}-{r}", work))
                    time.sleep(0.2)  # the last request's print_timing line reaches the log
                    timed = step_timings(server.log_path, mark, args.max_tokens, n)  # the log read once
                    fig["server_tpot_ms"] = server_tpot_ms(timed)
                    # what the client timed per token over what the server spent on it: the tools'
                    # definitions compared with the server's pace during each run taken out
                    fig["tpot_per_server"] = _ratio(fig.get("tpot_ms"), fig["server_tpot_ms"])
                    fig["server_busy"] = server_busy(timed, fig.get("window_s"), s)
                    runs[label][tool].append(fig)
    finally:
        server.stop()
    ours = {label: _medians(v["cardproof"]) for label, v in runs.items()}
    theirs = {label: _medians(v["guidellm"]) for label, v in runs.items()}
    print(f"GuideLLM {version} (its own venv {args.venv}), tokenizer {processor}")
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} CPUs; "
          f"llama-server {args.model} --parallel {max(STREAMS)}; prompt {PROMPT_TOKENS} tokens asked, max_tokens "
          f"{args.max_tokens}; {cores.describe()}")
    print("prompts: " + ("GuideLLM's own synthetic text, cardproof's filler (daemon/server/prompts.py)" if args.synthetic
                         else "both tools cardproof's (daemon/server/prompts.py), a fresh nonce each"))
    print(f"medians of {args.repeat} alternating runs per tool and step; [min-max] over the runs; ratio: the "
          f"median of cardproof/GuideLLM over the {args.repeat} pairs of runs made one after the other [min-max]")
    print(f"{'step':>5} | {'figure':<17} | {'cardproof':>22} | {'GuideLLM':>22} | {'ratio (pairs)':>20} |")
    worst = paced_worst = 0.0
    notes = set()
    ratios: dict[str, dict[str, float | None]] = {}

    def cell(fig: dict, key: str, digits: int) -> str:
        span = fig.get(f"{key}_range")
        return f"{_fmt(fig.get(key), digits)} [{_fmt(span[0], digits)}-{_fmt(span[1], digits)}]" if span else "—"

    def row(s: str, name: str, key: str, other: str, digits: int, mark: str = "") -> float | None:
        p = paired(runs[s]["cardproof"], runs[s]["guidellm"], key, other)
        ratio = f"{p[0]:.3f} [{p[1]:.2f}-{p[2]:.2f}]" if p else "—"
        theirs_cell = cell(theirs[s], other, digits) if other in theirs[s] else ""
        print(f"{s:>5} | {name:<17} | {cell(ours[s], key, digits):>22} | {theirs_cell:>22} | {ratio:>20} | {mark}")
        ratios.setdefault(s, {})[key] = p[0] if p else None
        return p[0] if p else None

    for s, _, _ in STEPS:
        for key, name, digits in (("requests", "requests", 0), ("prompt_tokens", "prompt tokens p50", 0),
                                  ("output_tokens", "output tokens p50", 0), ("e2e_ms", "request mean ms", 1),
                                  ("in_flight", "in flight (mean)", 2)):
            row(s, name, key, key, digits)
        for key, label, goal, why in ROWS:
            other = "tpot_ms" if key == "itl_ms" else key
            r = paired(runs[s]["cardproof"], runs[s]["guidellm"], key, other)
            off = r is not None and abs(r[0] - 1) > GOAL
            if goal and (r is None or off):
                worst = max(worst, abs(r[0] - 1) if r is not None else float("inf"))
            if off:
                notes.add(f"{label}: {why}")
            row(s, label, key, other, 2, ("OVER" if off else "ok") if goal else "")
        row(s, "server ms/token", "server_tpot_ms", "server_tpot_ms", 3,
            "the server's own decode time per token (its log) during each tool's runs")
        row(s, "ITL / server's", "tpot_per_server", "tpot_per_server", 3,
            "ITL over the server's own ms/token in the same run: the definitions compared without its pace")
        row(s, "server busy", "server_busy", "server_busy", 3,
            "the server's own time on the step's requests over window x streams: tok/s without its pace")
        for key in ("tpot_per_server", "server_busy"):
            r = ratios[s][key]
            paced_worst = max(paced_worst, abs(r - 1) if r is not None else float("inf"))
        print(f"{s:>5} | {'GuideLLM own rate':<17} | {'':>22} | {cell(theirs[s], 'output_tps_own', 2):>22} | "
              f"{'':>20} | its successful.mean of output tok/s")
    for s, streams, _ in STEPS:
        for tool, fig in (("cardproof", ours[s]), ("GuideLLM", theirs[s])):
            kept = fig.get("in_flight")
            if kept is not None and kept < streams * (1 - GOAL) and fig.get("requests") and fig.get("e2e_ms"):
                # the step's window holds its requests' time plus the client's own time between them
                gap_ms = fig["e2e_ms"] * (streams / kept - 1)
                print(f"step {s}: {tool} kept {kept:.2f} of {streams} requests in flight: its client spent about "
                      f"{gap_ms:.1f} ms between one answer and the next send, on a {fig['e2e_ms']:.1f} ms request; "
                      f"its aggregate tok/s is lower by that idle share ({1 - kept / streams:.0%}), and at fewer "
                      f"requests in flight each one decodes faster (lower ITL) -- the clients differ, not the "
                      f"definitions. Longer answers (--max-tokens) make that gap a smaller share")
    for s, _, _ in STEPS:
        itl, served, own = ratios[s]["tpot_ms"], ratios[s]["server_tpot_ms"], ratios[s]["tpot_per_server"]
        if itl and served and abs(itl - 1) > GOAL and abs(served - 1) > GOAL and (served - 1) * (itl - 1) > 0:
            print(f"step {s}: the server's own decode time per token was {served:.2f}x as long during cardproof's "
                  f"runs as during GuideLLM's (its print_timing lines; ITL ratio {itl:.2f}): the server decoded "
                  f"at another pace for the two tools' requests -- the text it continued or the machine during "
                  f"those runs -- and both clients timed it as it was"
                  + (f"; ITL over the server's own ms/token agrees ({own:.3f})" if own and abs(own - 1) <= GOAL
                     else ""))
        flight, e2e, tps = ratios[s]["in_flight"], ratios[s]["e2e_ms"], ratios[s]["output_tps"]
        if flight and e2e and tps and abs(flight - 1) <= 0.1 and abs(tps - 1) > GOAL:
            # same definition, same requests in flight: the requests themselves took longer under one tool
            print(f"step {s}: both kept {ours[s]['in_flight']:.2f} vs {theirs[s]['in_flight']:.2f} requests in flight; "
                  f"cardproof's took {e2e:.2f}x GuideLLM's time: the throughput differs inside the requests (the "
                  f"client reading the stream or the machine during that tool's run), not in how it is counted")
    for note in sorted(notes):
        print(f"differs -- {note}")
    print(f"aggregate throughput and median ITL within {GOAL:.0%} at every step: {'yes' if worst <= GOAL else 'no'}"
          f" (load average {load_before:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs: "
          f"{'a busy machine, read the [min-max] first' if load_before > os.cpu_count() else 'a quiet machine'})")
    print(f"the same with each run's server pace taken out (ITL / server's, server busy): "
          f"{'yes' if paced_worst <= GOAL else 'no'}, the farthest {paced_worst:.1%} from one -- where the raw "
          f"figures miss and these agree, the server decoded at another pace during one tool's runs than during "
          f"the other's, and both tools timed it as it was")
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
