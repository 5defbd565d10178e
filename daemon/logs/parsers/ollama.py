"""Facts from Ollama's server log (logfmt lines from ``server.go`` / ``memory.go``).

Ollama's offload line is the scheduler's plan; its runner later prints
llama.cpp's own ``offloaded N/M layers`` line, which the summary prefers
because it comes later in the load.
"""

from __future__ import annotations

import re

from .base import Fact, LineParsers, mib

PARSER = LineParsers("ollama")

# msg="offload to cuda" layers.requested=-1 layers.model=29 layers.offload=29 ...   (2024)
# msg=offload library=cuda layers.requested=49 layers.model=49 layers.offload=48 ... (2025)
_LAYERS = re.compile(r"layers\.model=(\d+) layers\.offload=(\d+)")
_PROJECTOR = re.compile(r'projector\.weights="([\d.]+) ([KMG]i?B)" projector\.graph="([\d.]+) ([KMG]i?B)"')


@PARSER.on("layers.offload=")
def parse_offload_plan(text: str) -> list[Fact]:
    facts = []
    m = _LAYERS.search(text)
    if m:
        facts += [Fact("offloaded_layers", float(m[2]), unit="layers"), Fact("total_layers", float(m[1]), unit="layers")]
    p = _PROJECTOR.search(text)
    if p:
        # weights plus the vision encoder's graph: what the projector costs on the card
        facts.append(Fact("projector_mib", round(mib(p[1], p[2]) + mib(p[3], p[4]), 2), unit="MiB"))
    return facts


# msg="llama runner started in 8.62 seconds"; with llama.cpp's server as the runner (2026):
# msg="llama-server started in 15.37 seconds"
_RUNNER_STARTED = re.compile(r"(?:llama runner|llama-server) started in ([\d.]+) seconds")


@PARSER.on("runner started in", "llama-server started in")
def parse_runner_started(text: str) -> list[Fact]:
    m = _RUNNER_STARTED.search(text)
    return [Fact("load_seconds", float(m[1]), unit="s")] if m else []


# The scheduler's memory plan for a runner, one line per item (device.go, Ollama 0.12 on):
#   msg="model weights" device=CUDA0 size="1.5 GiB"
#   msg="kv cache" device=CUDA0 size="1.6 GiB"
#   msg="compute graph" device=CUDA0 size="252.2 MiB"
#   msg="total memory" size="3.4 GiB"
# and before 0.12 one offload line with memory.required.full="11.4 GiB". These are Ollama's
# own estimates (its self-report), kept under plan_* names: never the card's figure.
_PLAN_ITEM = re.compile(r'msg="(model weights|kv cache|compute graph|total memory)"(?: device=(\S+))? '
                        r'size="([\d.]+) ([KMG]?i?B)"')
_PLAN_NAMES = {"model weights": "plan_weights_mib", "kv cache": "plan_kv_mib",
               "compute graph": "plan_compute_mib", "total memory": "plan_total_mib"}
_REQUIRED_FULL = re.compile(r'memory\.required\.full="([\d.]+) ([KMG]?i?B)"')


@PARSER.on('msg="model weights"', 'msg="kv cache"', 'msg="compute graph"', 'msg="total memory"')
def parse_memory_plan(text: str) -> list[Fact]:
    m = _PLAN_ITEM.search(text)
    if not m:
        return []
    return [Fact(_PLAN_NAMES[m[1]], round(mib(m[3], m[4]), 2), unit="MiB", device=m[2])]


@PARSER.on("memory.required.full=")
def parse_required_full(text: str) -> list[Fact]:
    m = _REQUIRED_FULL.search(text)
    return [Fact("plan_total_mib", round(mib(m[1], m[2]), 2), unit="MiB")] if m else []


# msg=load request="{Operation:commit LoraPath:[] Parallel:4 BatchSize:512 FlashAttention:Enabled KvSize:16384 ...}"
# (0.12 on): the context the runner allocates (all slots together) and the number of slots
_LOAD_REQUEST = re.compile(r"\bParallel:(\d{1,12})\b.*?\bKvSize:(\d{1,12})\b")


@PARSER.on("KvSize:")
def parse_load_request(text: str) -> list[Fact]:
    m = _LOAD_REQUEST.search(text)
    if not m:
        return []
    return [Fact("ctx_size", float(m[2]), unit="tokens"), Fact("slots", float(m[1]), unit="slots")]
