"""Facts from Ollama's server log (logfmt lines from ``server.go`` / ``memory.go``).

Ollama's offload line is the scheduler's plan; its runner later prints
llama.cpp's own ``offloaded N/M layers`` line, which the summary prefers
because it comes later in the load.
"""

from __future__ import annotations

import re

from . import Fact, mib, parser

# msg="offload to cuda" layers.requested=-1 layers.model=29 layers.offload=29 ...   (2024)
# msg=offload library=cuda layers.requested=49 layers.model=49 layers.offload=48 ... (2025)
_LAYERS = re.compile(r"layers\.model=(\d+) layers\.offload=(\d+)")
_PROJECTOR = re.compile(r'projector\.weights="([\d.]+) ([KMG]i?B)" projector\.graph="([\d.]+) ([KMG]i?B)"')


@parser("layers.offload=")
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


# msg="llama runner started in 8.62 seconds"
_RUNNER_STARTED = re.compile(r"llama runner started in ([\d.]+) seconds")


@parser("runner started in")
def parse_runner_started(text: str) -> list[Fact]:
    m = _RUNNER_STARTED.search(text)
    return [Fact("load_seconds", float(m[1]), unit="s")] if m else []
