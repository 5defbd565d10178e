"""One run in progress (:class:`RunContext`), a planned cell and the walk through the cells: what every
step of a run reads.

Kept apart from the runner so that the steps it calls (loads, axes, the fit
test, variants) can name the context's type without importing the runner
that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from cardproof.daemon.store import liveness
from cardproof.daemon.backends import Backend
from cardproof.daemon.campaign.model import Campaign
from cardproof.daemon.energy.capture import EnergyCapture
from cardproof.daemon.memory.capture import MemoryCapture
from cardproof.daemon.run.record import RunOutcome, RunState, finish_run
from cardproof.daemon.store import Store


@dataclass
class PlannedCell:
    model: str
    prompt_class: str
    reasoning: bool
    repetitions: int
    pinned: bool


@dataclass
class Walk:
    """Where the walk through the cells stands: the model on the server, its load, what was refused."""

    pin: str | None
    canaries_done: bool
    model: str | None = None
    load_id: int | None = None
    done: int = 0  # samples taken or given up so far
    refused: dict[str, str] = field(default_factory=dict)  # model -> why it was not loaded beside the pin

    @property
    def loaded(self) -> bool:
        """A model was loaded for the cells so far (not refused), so probes and canaries can use it."""
        return self.model is not None and self.model not in self.refused


@dataclass
class RunContext:
    """One run in progress: what every step of it reads, and the counts it keeps."""

    store: Store
    campaign: Campaign
    backend: Backend
    echo: Callable[[str], None]  # progress lines
    run_id: int
    state: RunState
    memory_source: object = None  # replaces the NVML reader (tests: recorded readings)
    lock: liveness.RunLock | None = None
    mem: MemoryCapture | None = None  # started once the models are registered
    model_ids: dict[str, int] = field(default_factory=dict)
    energy_sources: list | None = None  # replaces the machine's energy counters (tests: recorded counters)
    energy: EnergyCapture | None = None  # started with the memory capture

    def finish(self, status: str, code: int, error: str | None = None) -> RunOutcome:
        return finish_run(self.store, self.campaign, self.run_id, self.state, self.echo, status, code, error,
                          lock=self.lock)
