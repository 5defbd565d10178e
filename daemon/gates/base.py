"""What a gate sees and what it answers.

A gate is a small judgement over one sample: did the thing it guards against
happen? It never decides alone whether a sample counts; the campaign says
whether a fired gate excludes the sample from medians (``exclude``).

One module per gate holds all of it (:class:`Gate`): the check, what it
gathers from the store beyond the sample row, its defaults, its canary and
its description (English, marked ``N_()``; the German is in the report's catalogue).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from cardproof.daemon.store.said import Said, Saying, english, said_json  # noqa: F401  (gates build their observations with it)

if TYPE_CHECKING:
    from ..store import Store


@dataclass(frozen=True)
class GateOutcome:
    fired: bool | None  # None: the gate could not observe what it guards
    observed: float | None = None
    observed_text: "Saying | None" = None  # a Said, so each page says it in its own language


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
    host: dict | None = None  # other processes' CPU time during the cell (hostload.foreign_cores)
    extra: dict = field(default_factory=dict)  # what a gate's own gather adds that no field above names


@dataclass(frozen=True)
class JudgedRun:
    """What a gate's gather may read: the store, the run row, its cells and its frozen campaign."""

    store: "Store"
    run: dict
    cells: dict[int, dict]  # cell id -> cells row
    campaign: Any  # the parsed Campaign, or None when the frozen text no longer validates
    campaign_text: str


#: ``gather(judged) -> per_sample``: called once per judging; ``per_sample(sample row)`` gives
#: SampleContext fields (a dict; keys that are no field go into ``SampleContext.extra``).
Gather = Callable[[JudgedRun], Callable[[dict], dict]]


@dataclass(frozen=True)
class Canary:
    """How a gate is provoked once against the real server (see ``daemon/run/canaries.py``).

    ``provoke(run)`` sends its request(s) through a ``CanaryRun`` and plans
    its verdict; ``order`` places it among the others (a canary that evicts
    the model runs after every one that needs it loaded). ``recorded``
    builds the sample context from a recorded line, for a gate that cannot be
    provoked per request; the gate's own check judges it.
    """

    provoke: Callable[[Any], None]
    order: int
    recorded: Callable[[dict], SampleContext | None] | None = None


@dataclass(frozen=True)
class Gate:
    name: str
    description: str  # English; the message id the article translates
    check: Callable[[SampleContext, float], GateOutcome]
    default_threshold: float = 0.0
    default_exclude: bool = True
    threshold_unit: str = ""
    order: int = 1000  # place in the results and the article's gate table
    canary: Canary | None = None
    gather: Gather | None = None


@dataclass(frozen=True)
class GateConfig:
    threshold: float
    exclude: bool
