"""Do cardproof's load figures agree with GuideLLM's on the same server? Side by side, with ratios.

Starts a real llama-server (one tiny model, ``--parallel 4``), then measures
it twice at every step -- synchronous (one stream) and 1/2/4 concurrent
streams -- with the same prompt size and answer length: once through
cardproof's ``[load]`` steps, once through GuideLLM. GuideLLM is installed
by this script from PyPI into a virtual environment of its own
(``~/.cache/cardproof/guidellm-venv``, or ``--venv``); it is never a
dependency of cardproof.

Printed per step: output tok/s (aggregate), median TTFT and median ITL of
each, and the ratio cardproof/GuideLLM. Goal: within 5 % on aggregate
throughput and median ITL at every step. Where they differ, the line says
which definition differs:

* ITL: cardproof takes the gaps between streamed chunks that carry text;
  GuideLLM takes per request (end-to-end - TTFT) / (output tokens - 1),
  i.e. time per output token. With one token per chunk the two agree; a
  server that sends several tokens per chunk makes chunk gaps longer.
* output tok/s: cardproof divides the generated tokens (server counters)
  of a step by its wall time; GuideLLM reports a rate over its own
  measurement window (its ``successful.mean``), which may leave out warm-up
  and cool-down.
* TTFT: both from sending to the first text; GuideLLM's prompts are its own
  synthetic text of the same token count, cardproof's open with a nonce.

GuideLLM sizes its synthetic prompts with a Hugging Face tokenizer
(``--processor``, passed through); on a machine without access to the Hub,
give it a local tokenizer folder.

    python bench/peer_agreement.py [--requests-per-stream 8] [--max-tokens 64] [--venv DIR]
                                   [--guidellm-version X] [--processor ID_OR_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from cardproof.daemon import llamacpp
from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.load.stats import run_steps
from cardproof.daemon.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.tinymodels import make_tiny

MODEL = "tiny-a"
STREAMS = (1, 2, 4)
PROMPT_TOKENS = 128
GOAL = 0.05


def guidellm_bin(venv_dir: Path, version: str | None) -> Path:
    """GuideLLM's command in its own venv, installed there from PyPI the first time."""
    exe = venv_dir / "bin" / "guidellm"
    if exe.exists():
        return exe
    print(f"installing GuideLLM into {venv_dir} (its own venv; not a cardproof dependency) ...", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    spec = f"guidellm=={version}" if version else "guidellm"
    subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", spec], check=True)
    return exe


def run_guidellm(exe: Path, url: str, streams: int, requests: int, max_tokens: int, out: Path,
                 processor: str | None = None) -> Path:
    """One GuideLLM benchmark: synchronous for one stream, concurrent otherwise."""
    rate = ["--rate-type", "synchronous"] if streams == 1 else ["--rate-type", "concurrent", "--rate", str(streams)]
    path = out / f"guidellm-{streams}.json"
    cmd = [str(exe), "benchmark", "--target", url, "--model", MODEL, *rate,
           "--max-requests", str(requests),
           "--data", f"prompt_tokens={PROMPT_TOKENS},output_tokens={max_tokens}",
           "--output-path", str(path), *(["--processor", processor] if processor else [])]
    subprocess.run(cmd, check=True, env=os.environ | {"GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL": "WARNING"})
    return path


def _find(obj, key: str):
    """The first value under ``key`` anywhere in nested JSON (GuideLLM's layout moved between versions)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            found = _find(v, key)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find(v, key)
            if found is not None:
                return found
    return None


def _stat(metric, which: str) -> float | None:
    """``successful.<which>`` of one GuideLLM metric (older files: the metric's own ``<which>``)."""
    if not isinstance(metric, dict):
        return None
    part = metric.get("successful", metric)
    value = part.get(which) if isinstance(part, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def guidellm_figures(path: Path) -> dict:
    data = json.loads(path.read_text())
    bench = (data.get("benchmarks") or [data])[0]
    metrics = _find(bench, "metrics") or {}
    return {
        "output_tps": _stat(metrics.get("output_tokens_per_second"), "mean"),
        "ttft_ms": _stat(metrics.get("time_to_first_token_ms"), "median"),
        "itl_ms": _stat(metrics.get("inter_token_latency_ms"), "median"),
    }


def cardproof_figures(url: str, db: Path, per_stream: int, max_tokens: int) -> dict[int, dict]:
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
name = "{MODEL}"
[load]
streams = {list(STREAMS)}
requests_per_stream = {per_stream}
prompt_class = "peer"
max_tokens = {max_tokens}
"""
    store = open_store(db)
    out = run_campaign(store, parse_campaign(text, "peer.toml"), echo=lambda s: None)
    figures = {f.step["streams"]: {"output_tps": f.output_tps, "ttft_ms": f.ttft_ms.p50, "itl_ms": f.itl_ms.p50,
                                   "prompt_tokens": f.prompt_tokens.p50}
               for f in run_steps(store.db.conn, out.run_id, "load")}
    store.close()
    return figures


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def _fmt(v, digits=1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests-per-stream", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "cardproof" / "guidellm-venv")
    ap.add_argument("--guidellm-version", default=None, help="a GuideLLM version from PyPI (default: the newest)")
    ap.add_argument("--processor", default=None, help="the tokenizer GuideLLM sizes its prompts with (id or folder)")
    args = ap.parse_args()
    exe = guidellm_bin(args.venv, args.guidellm_version)
    work = Path(tempfile.mkdtemp(prefix="cardproof-peer-"))
    models = make_tiny(work / "models")
    server = llamacpp.LlamaServerProcess(
        ["-m", str(models[MODEL]), "--alias", MODEL, "--parallel", str(max(STREAMS)), "--ctx-size", "8192",
         "--threads", "2", "--no-webui"], log_path=work / "server.log").start()
    try:
        ours = cardproof_figures(server.url, work / "peer.db", args.requests_per_stream, args.max_tokens)
        theirs = {s: guidellm_figures(run_guidellm(exe, server.url, s, s * args.requests_per_stream,
                                                   args.max_tokens, work, args.processor)) for s in STREAMS}
    finally:
        server.stop()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; prompt {PROMPT_TOKENS} tokens asked "
          f"(cardproof's real count: {', '.join(_fmt(ours[s]['prompt_tokens'], 0) for s in STREAMS)}), "
          f"{args.max_tokens} generated")
    print(f"{'streams':>7} | {'figure':<13} | {'cardproof':>10} | {'GuideLLM':>10} | {'ratio':>6} |")
    worst = 0.0
    for s in STREAMS:
        for key, label in (("output_tps", "output tok/s"), ("ttft_ms", "TTFT p50 ms"), ("itl_ms", "ITL p50 ms")):
            r = _ratio(ours[s][key], theirs[s][key])
            note = ""
            if r is not None and abs(r - 1) > GOAL and key != "ttft_ms":
                worst = max(worst, abs(r - 1))
                note = {"itl_ms": "ITL: gaps between chunks (cardproof) vs time per output token (GuideLLM)",
                        "output_tps": "tok/s: step wall time (cardproof) vs GuideLLM's measurement window"}[key]
            print(f"{s:>7} | {label:<13} | {_fmt(ours[s][key], 2):>10} | {_fmt(theirs[s][key], 2):>10} | "
                  f"{_fmt(r, 3):>6} | {note}")
    print(f"throughput and ITL within {GOAL:.0%} at every step: {'yes' if worst <= GOAL else 'no'}")
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
