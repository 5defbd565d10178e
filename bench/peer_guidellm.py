"""GuideLLM's half of the peer bench: its own venv, a local tokenizer, a scenario per step, its figures.

GuideLLM is installed from PyPI into a virtual environment of its own
(never a cardproof dependency). It runs offline here: the Hugging Face
tokenizer it sizes prompts with is built from the tiny model's GGUF
vocabulary (``peer_tokenizer.py``), the Hub, datasets and transformers are
told to stay offline, and its prompts come from a local file or are synthetic: nothing to download. The
scenario file format is GuideLLM's from 0.5 on (``guidellm run
--scenario``); older versions had other commands and are not supported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

from cardproof.daemon.server.prompts import build_prompt, new_nonce
from cardproof.daemon.server.tinymodels import CHAT_TEMPLATE, TINY_MODELS, build_vocab


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


def guidellm_version(venv_dir: Path) -> str:
    code = "from importlib.metadata import version; print(version('guidellm'))"
    out = subprocess.run([str(venv_dir / "bin" / "python"), "-c", code], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def local_tokenizer(venv_dir: Path, model: str, n_ctx: int, out: Path) -> Path:
    """A Hugging Face tokenizer folder for the tiny ``model``, built from its GGUF vocabulary (no Hub access)."""
    tokens, scores, types = build_vocab(next(t.vocab for t in TINY_MODELS if t.name == model))
    vocab = {"tokens": tokens, "scores": scores, "types": types, "chat_template": CHAT_TEMPLATE, "n_ctx": n_ctx}
    subprocess.run([str(venv_dir / "bin" / "python"), str(Path(__file__).with_name("peer_tokenizer.py")), str(out)],
                   input=json.dumps(vocab), text=True, check=True)
    return out


def prompts_file(path: Path, count: int, prompt_tokens: int, max_tokens: int) -> Path:
    """cardproof's own prompts as a GuideLLM data file: ``count`` JSON lines, each ``build_prompt``'s text
    for ``prompt_tokens`` (daemon/server/prompts.py) with a fresh nonce, and ``max_tokens`` as its output count.

    GuideLLM's synthetic text is other words than cardproof's filler, and the
    server does not decode every text at one pace: with the tiny model its
    own time per token (print_timing) was about 11 % longer continuing
    GuideLLM's text than cardproof's, at the same lengths. Both tools are
    given the same prompts so that they time the same work.
    """
    rows = ({"prompt": build_prompt(prompt_tokens, new_nonce()), "output_tokens_count": max_tokens}
            for _ in range(count))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def scenario(url: str, model: str, streams: int, requests: int, prompt_tokens: int, max_tokens: int,
             tokenizer: str, out: Path, *, profile: str = "concurrent", prompts: Path | None = None) -> dict:
    """One GuideLLM step: the same model, prompt size and answer length as cardproof's step.

    ``prompts``: a data file of cardproof's prompts (:func:`prompts_file`),
    each with ``max_tokens`` as its output count; without it GuideLLM makes
    its own synthetic text of ``prompt_tokens``.

    ``max_tokens`` pinned: GuideLLM (0.8) sends its ``output_tokens`` as the
    request's ``max_completion_tokens`` with ``ignore_eos`` true, so every
    answer is that long; the extras pin ``ignore_eos`` whatever a version
    does, and cardproof's step sends it too (``fixed_length.py``).
    ``cache_prompt`` false and thinking off, as cardproof sends them to a
    llama.cpp server.
    """
    kind = {"kind": "synchronous"} if profile == "synchronous" else {"kind": "concurrent", "streams": [streams]}
    return {"spec": {
        "backend": {"kind": "openai_http", "target": url, "model": model, "request_format": "/v1/chat/completions",
                    "extras": {"body": {"cache_prompt": False, "chat_template_kwargs": {"enable_thinking": False},
                                        "ignore_eos": True}}},
        "profile": kind,
        "constraints": [{"kind": "max_requests", "count": requests}],
        "tokenizer": {"kind": "hf_auto", "model": tokenizer},
        "data": [{"kind": "json_file", "path": str(prompts)} if prompts else
                 {"kind": "synthetic_text", "prompt_tokens": prompt_tokens, "output_tokens": max_tokens}],
        "outputs": [{"kind": "json", "path": str(out)}],
    }}


def run_step(exe: Path, spec: dict, label: str, out: Path) -> Path:
    """Run one GuideLLM scenario; its JSON report's path. A failure ends the bench with GuideLLM's own words."""
    path = Path(spec["spec"]["outputs"][0]["path"])
    file = out / f"guidellm-{label}.scenario.json"
    file.write_text(json.dumps(spec, indent=1))
    # nothing may reach for the Hub: the tokenizer is a local folder, the prompts a local file or synthetic
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL": "WARNING"}
    done = subprocess.run([str(exe), "run", "--scenario", str(file), "--disable-console-interactive"],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        sys.exit(f"GuideLLM failed at step {label} (exit {done.returncode}):\n" + "\n".join(tail))
    return path


def _successful(metrics: dict, name: str, which: str) -> float | None:
    part = (metrics.get(name) or {}).get("successful") or {}
    value = part.get(which)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def figures(path: Path) -> dict:
    """GuideLLM's figures of one step, under cardproof's names.

    ``output_tps``: all output tokens of the step over its duration (the same
    definition as cardproof's aggregate; GuideLLM's own ``successful.mean``
    of its rate, kept as ``output_tps_own``, equals it in 0.8). ``tpot_ms``: the median over
    tokens of each request's (end-to-end - TTFT) / (output tokens - 1),
    GuideLLM's ``inter_token_latency_ms``.
    """
    data = json.loads(path.read_text())
    bench = data["benchmarks"][0]
    m = bench["metrics"]
    tokens = _successful(m, "output_token_count", "total_sum")
    duration = bench.get("duration")
    return {
        "output_tps": tokens / duration if tokens and duration else None,
        "output_tps_own": _successful(m, "output_tokens_per_second", "mean"),
        "ttft_ms": _successful(m, "time_to_first_token_ms", "median"),
        "tpot_ms": _successful(m, "inter_token_latency_ms", "median"),
        "prompt_tokens": _successful(m, "prompt_token_count", "median"),
        "output_tokens": _successful(m, "output_token_count", "median"),
        "requests": int(_successful(m, "request_latency", "count") or 0),
        # where throughput differs at a similar median ITL: how long requests took and how many were in flight
        "e2e_ms": (lambda v: v * 1000.0 if v is not None else None)(_successful(m, "request_latency", "mean")),
        "in_flight": _successful(m, "request_concurrency", "mean"),
        "window_s": duration,  # from its first request's start to its last one's end
    }

