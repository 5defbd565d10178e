"""Capability probes: one small module per probe, registered in PROBES.

Adding a probe is adding one module with ``run(ctx) -> list[Unit]`` and one
entry here (plus its known defects in ``defects.toml``).
"""

from __future__ import annotations

from . import coding, reasoning, thinking, tools, vision
from .base import VERDICTS, Probe, ProbeContext, Unit, summarise

PROBES: dict[str, Probe] = {
    "tools": Probe("tools", "tools", "well-formed tool calls for a given schema, and the result used", tools.run),
    "thinking": Probe("thinking", "thinking", "a reasoning channel that is separate from the answer", thinking.run),
    "reasoning": Probe("reasoning", None, "short tasks with checked answers, well-known and changed forms",
                       reasoning.run),
    "coding": Probe("coding", None, "small functions run against tests in a bounded subprocess", coding.run),
    "vision": Probe("vision", "vision", "names the colour of a generated image (only where declared)", vision.run),
}

__all__ = ["PROBES", "VERDICTS", "Probe", "ProbeContext", "Unit", "summarise"]
