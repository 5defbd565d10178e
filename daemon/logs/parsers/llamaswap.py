"""Swap events from llama-swap's own log (proxy/process.go and its swap scheduler).

llama-swap starts one upstream server per model and stops it on a swap or
when its ``ttl`` runs out. Its lines name the model in angle brackets::

    [DEBUG] <model>: starting swap for model qwen, evicting [gemma]   (scheduler, newer versions)
    [INFO] <qwen> Health check passed on http://127.0.0.1:9001/health
    [INFO] <qwen> Unloading model, TTL of 300s reached

The facts say which model a swap brought in, what it evicted, when the
upstream became healthy, and which model an idle timeout unloaded.
"""

from __future__ import annotations

import re

from .base import Fact, LineParsers

PARSER = LineParsers("llamaswap")

_SWAP = re.compile(r"starting swap for model (\S+?),? evicting \[([^\]]*)\]")
_SWAP_BARE = re.compile(r"starting swap for model (\S+)")
_TTL = re.compile(r"<([^>]+)> Unloading model, TTL of (\d+)s reached")
_READY = re.compile(r"<([^>]+)> Health check passed on (\S+)")


@PARSER.on("starting swap for model")
def parse_swap(text: str) -> list[Fact]:
    m = _SWAP.search(text)
    if m:
        facts = [Fact("swap_to_model", value_text=m[1].rstrip(","))]
        if m[2].strip():
            facts.append(Fact("swap_evicting", value_text=m[2].strip()))
        return facts
    m = _SWAP_BARE.search(text)
    return [Fact("swap_to_model", value_text=m[1].rstrip(","))] if m else []


@PARSER.on("Unloading model, TTL")
def parse_ttl_unload(text: str) -> list[Fact]:
    m = _TTL.search(text)
    return [Fact("ttl_unload_seconds", float(m[2]), value_text=m[1], unit="s")] if m else []


@PARSER.on("Health check passed on")
def parse_upstream_ready(text: str) -> list[Fact]:
    m = _READY.search(text)
    return [Fact("upstream_ready", value_text=m[1])] if m else []
