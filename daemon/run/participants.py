"""The parts of a run beside its cells, as participants that the run's phases call.

A run (:mod:`runner`) is a sequence of phases: *start*; per model *enter*,
*cells*, *leave*; *after the cells*; *judge*; *finish*. A participant takes
part in the phases it overrides below and in no other. The cell loop calls a
phase (``leave``, ``loaded``, ``cell_done``), never a participant by name, so a
new step of a run is one more class here and one more entry in
:data:`PARTICIPANTS`, with no change to the loop.

The order of :data:`PARTICIPANTS` is the order within a phase: on leaving a
model its load and depth steps run first, then its probes, then the canaries
(which may evict it, so they come last).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from cardproof.daemon.run.canaries import run_canaries
from cardproof.daemon.energy.capture import EnergyCapture
from cardproof.daemon.campaign.tables.depth import planned_samples as axes_samples
from cardproof.daemon.run.load.fit import run_fit
from cardproof.daemon.run.load.run import run_axes
from cardproof.daemon.memory.capture import MemoryCapture
from cardproof.daemon.run.probes import run_model_probes
from cardproof.daemon.run.quality import run_quality
from cardproof.daemon.run.variants.run import judge_variants, planned_samples as variant_samples, run_variants

if TYPE_CHECKING:
    from cardproof.daemon.campaign.model import Campaign
    from cardproof.daemon.run.context import PlannedCell, RunContext, Walk

    #: measures one variant's cells on the load just made (the runner's cell loop, for variants)
    Measure = Callable[[RunContext, str, int | None, tuple[str, str] | None], None]


class Participant:
    """One part of a run; every phase does nothing unless overridden."""

    name = ""

    def planned(self, campaign: Campaign) -> int:
        """Samples this participant adds to the run's plan (its coverage counts them)."""
        return 0

    def start(self, ctx: RunContext) -> None:
        """The models are registered; no cell has run."""

    def loaded(self, ctx: RunContext, load_id: int, pid: int | None, model: str) -> None:
        """A request of a cell made the server load ``model`` (a router's on-demand load)."""

    def cell_start(self, ctx: RunContext, cell_id: int, load_id: int | None) -> None:
        """A cell's first repetition is about to be sent (``load_id``: None until a request loads the model)."""

    def cell_done(self, ctx: RunContext, cell_id: int, load_id: int | None) -> None:
        """A cell's repetitions are taken."""

    def leave(self, ctx: RunContext, walk: Walk, next_cell: PlannedCell | None, position: int) -> None:
        """The walk leaves ``walk.model`` (still loaded where ``walk.loaded``); ``next_cell`` is None at the end."""

    def after_cells(self, ctx: RunContext, measure: Measure) -> None:
        """Every cell is done and its model left: steps that need servers or loads of their own."""

    def judge(self, ctx: RunContext) -> None:
        """The logs are captured; before the gates and rules judge the samples."""

    def stop(self, ctx: RunContext) -> None:
        """The run ends, however it ends (also when interrupted)."""


class Memory(Participant):
    """Memory from the card and of the server process: started with the run, read after each load and
    around each cell."""

    name = "memory"

    def start(self, ctx):
        ctx.mem = MemoryCapture(ctx.store, ctx.run_id, source=ctx.memory_source).start()
        ctx.echo(ctx.mem.status_line())

    def loaded(self, ctx, load_id, pid, model):
        ctx.mem.after_load(load_id, pid=pid, arg=ctx.backend.runner_arg(model))

    def cell_start(self, ctx, cell_id, load_id):
        ctx.mem.start_cell(cell_id, load_id)

    def cell_done(self, ctx, cell_id, load_id):
        ctx.mem.end_cell(cell_id, load_id)

    def stop(self, ctx):
        if ctx.mem is not None:
            ctx.mem.stop()


class Energy(Participant):
    """The machine's energy counters: the idle draw before the first cell, then each cell's start and end."""

    name = "energy"

    def start(self, ctx):
        ctx.energy = EnergyCapture(ctx.store, ctx.run_id, sources=ctx.energy_sources).start()
        ctx.echo(ctx.energy.status_line())

    def cell_start(self, ctx, cell_id, load_id):
        ctx.energy.cell_start(cell_id)

    def cell_done(self, ctx, cell_id, load_id):
        ctx.energy.cell_end(cell_id)

    def stop(self, ctx):
        if ctx.energy is not None:
            ctx.energy.stop()


class Axes(Participant):
    """``[load]`` and ``[depth]`` steps on each model as it is left, while it is loaded."""

    name = "axes"

    def planned(self, campaign):
        return axes_samples(campaign.load, campaign.depth, len(campaign.models))

    def leave(self, ctx, walk, next_cell, position):
        if walk.loaded:
            run_axes(ctx, walk.model, walk.load_id)


class Probes(Participant):
    """The campaign's probes on each model as it is left: no load of their own."""

    name = "probes"

    def leave(self, ctx, walk, next_cell, position):
        if ctx.campaign.probes and walk.loaded:
            run_model_probes(ctx.store, ctx.backend, ctx.campaign, ctx.run_id, walk.model,
                             ctx.model_ids[walk.model], ctx.echo)


class Canaries(Participant):
    """Every gate provoked once, before the pin is touched (they may evict a model, so never on the pin).

    A plan of the pin alone runs them after its cells, with no eviction.
    """

    name = "canaries"

    def leave(self, ctx, walk, next_cell, position):
        if walk.canaries_done or not walk.loaded:
            return
        if next_cell is None:
            allow_evict = walk.model != walk.pin
        elif next_cell.pinned and walk.model != walk.pin:
            allow_evict = True
        else:
            return
        run_canaries(ctx.store, ctx.backend, ctx.campaign, ctx.run_id, walk.model, ctx.model_ids[walk.model],
                     position=position, echo=ctx.echo, allow_evict=allow_evict, load_id=walk.load_id)
        walk.canaries_done = True


class Variants(Participant):
    """``[variants]``: each variant on the same cells as its base, on a server or load of its own."""

    name = "variants"

    def planned(self, campaign):
        return variant_samples(campaign)

    def after_cells(self, ctx, measure):
        run_variants(ctx, measure)

    def judge(self, ctx):
        judge_variants(ctx.store, ctx.run_id, ctx.echo)  # each variant's arguments against its load's lines


class Fit(Participant):
    """``[fit]``: a server of its own per context, after the run's own loads (the card free of them)."""

    name = "fit"

    def after_cells(self, ctx, measure):
        run_fit(ctx)


class Quality(Participant):
    """``[quality]``: llama-perplexity on each ladder and variant, after the variants (whose models it reads)."""

    name = "quality"

    def after_cells(self, ctx, measure):
        run_quality(ctx)


#: every participant of a run, in the order each phase calls them
PARTICIPANTS: tuple[Participant, ...] = (Energy(), Memory(), Axes(), Probes(), Canaries(), Variants(), Fit(),
                                           Quality())
