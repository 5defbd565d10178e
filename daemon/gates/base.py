"""What a gate sees and what it answers.

A gate is a small judgement over one sample: did the thing it guards against
happen? It never decides alone whether a sample counts; the campaign says
whether a fired gate excludes the sample from medians (``exclude``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class GateOutcome:
    fired: bool | None  # None: the gate could not observe what it guards
    observed: float | None = None
    observed_text: str | None = None


@dataclass
class SampleContext:
    """Everything the gates may look at for one sample, gathered from the store."""

    sample: dict  # the samples row
    response: dict  # parsed response_json (timings, usage, finish_reason, answer, ...)
    max_tokens: int
    load_inside_seconds: float | None = None  # a router load that happened inside this request
    load_duration_seconds: float | None = None  # a runtime's own load_duration (Ollama)
    facts: dict = field(default_factory=dict)  # the load's facts: name -> value (or {device: value})
    gpu_available: bool = False
    gpu_reason: str | None = None
    gpu_share: float | None = None  # runtime's self-reported GPU share, 0..1
    embedding: list[dict] = field(default_factory=list)  # probes around the cell
    embedding_configured: bool = False
    foreign: dict | None = None  # {"tokens": n, "requests": n, "clients": [...], "source": ...}


@dataclass(frozen=True)
class Gate:
    name: str
    description: str
    check: Callable[[SampleContext, float], GateOutcome]
    default_threshold: float = 0.0
    default_exclude: bool = True
    threshold_unit: str = ""


@dataclass(frozen=True)
class GateConfig:
    threshold: float
    exclude: bool
