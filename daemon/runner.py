"""The runner: plan cells, load each model once, measure, store as it goes.

A run's own record -- its frozen campaign, its row, the status, exit code and
coverage it ends with -- is kept by :mod:`run_record`, its loads by
:mod:`run_loads`; this module walks the cells and measures. Every step reads
one :class:`RunContext`.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Callable

from . import cellchecks, liveness
from .backends import Backend, BackendError, backend_for, evidence
from .campaign import Campaign
from .canaries import run_canaries
from . import gate_counts
from .judge import judge_run
from .load.campaign import planned_samples
from .load.fit import run_fit
from .load.run import run_axes
from .logs import LogSourceError, capture_file
from .logs.requests import cache_from_logs
from .memory.capture import MemoryCapture
from .probes.run import run_model_probes
from .prompts import build_prompt
from .redact import public_url
from .rules.outcome import evaluate_rules
from .run_loads import load_for_cell, note_crash, refused_samples, register_models, router_child_pid
from .run_context import PlannedCell, RunContext
from .run_record import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, RunOutcome, RunState,
                         capture_logs_once, measuring_commits, register_campaign, start_run,
                         sync_point)
from .sampling import SampleRequest, take_sample
from .store import Store, StoreError, dumps, utcnow
from .variants.run import judge_variants, planned_samples as variant_samples, run_variants, samples_not_taken

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PARTIAL", "PlannedCell", "RunContext", "RunOutcome",
           "plan_cells", "register_campaign", "router_child_pid", "run_campaign"]


def plan_cells(campaign: Campaign) -> list[PlannedCell]:
    """All cells in the order that needs the fewest loads.

    One model at a time; the pinned (production) model goes last so that it
    is never unloaded in the middle of the campaign (principle 12).
    """
    models = sorted(campaign.models, key=lambda m: m.pinned)
    cells = []
    for m in models:
        for reasoning in sorted(campaign.reasoning):
            for cls in campaign.prompt_classes:
                cells.append(PlannedCell(m.name, cls, reasoning, campaign.repetitions_for(reasoning), m.pinned))
    return cells


class _Interrupted(BaseException):
    """SIGTERM, raised where the run happens to be. Not an Exception, like KeyboardInterrupt: a
    request it cuts short must end the run, never be stored as one more exception sample."""


def run_campaign(
    store: Store,
    campaign: Campaign,
    *,
    echo: Callable[[str], None] = print,
    backend: Backend | None = None,
    memory_source=None,
) -> RunOutcome:
    """Run ``campaign`` against its server, storing every sample as it is taken.

    ``memory_source`` replaces the NVML reader (tests: recorded readings).
    """
    own_backend = backend is None
    backend = backend or backend_for(campaign)
    try:
        # held until the run's status is written; any other end leaves it unlocked: proof of an unfinished run
        with liveness.RunLock(store.path) as lock:
            cells = plan_cells(campaign)
            state = RunState(planned=sum(c.repetitions for c in cells)
                             + planned_samples(campaign.load, campaign.depth, len(campaign.models))
                             + variant_samples(campaign))
            run_id = start_run(store, campaign, state.planned, echo, lock)
            ctx = RunContext(store, campaign, backend, echo, run_id, state, memory_source, lock)
            echo(f"run {run_id}: campaign {campaign.name} ({campaign.sha256[:12]}), {len(cells)} cells, "
                 f"{state.planned} samples planned")
            return _run(ctx, cells)
    finally:
        if own_backend:
            backend.close()


def _run(ctx: RunContext, cells: list[PlannedCell]) -> RunOutcome:
    store, campaign, backend, echo, state = ctx.store, ctx.campaign, ctx.backend, ctx.echo, ctx.state

    def on_term(signum, frame):
        raise _Interrupted(f"signal {signum}")

    old = None
    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not in the main thread
        pass
    try:
        try:
            props = backend.server_info()
        except BackendError as exc:
            echo(f"error: server {public_url(campaign.url)} not reachable: {exc}")
            return ctx.finish("failed", EXIT_FAILED, f"server not reachable: {exc}")
        store.update(
            "runs",
            ctx.run_id,
            {
                "server_version": str(props.get("build_info") or props.get("version") or ""),
                "server_build": str(props.get("build_info") or ""),
                "server_props_json": dumps(props),
            },
        )
        if campaign.log_file:
            try:  # lines from before the run are kept, but belong to no run
                capture_file(store, campaign.log_file)
            except (LogSourceError, StoreError) as exc:
                echo(f"warning: log capture: {exc}")
        ctx.model_ids = register_models(ctx)
        ctx.mem = MemoryCapture(store, ctx.run_id, source=ctx.memory_source).start()
        echo(ctx.mem.status_line())
        try:
            with measuring_commits(store):
                _run_cells(ctx, cells)
                run_variants(ctx, _variant_cells)  # [variants]: each on the same cells, on a server of its own
                run_fit(ctx)  # [fit]: a server of its own per context, after the run's own loads
        finally:
            ctx.mem.stop()
    except (KeyboardInterrupt, _Interrupted) as exc:
        why = str(exc) or "keyboard interrupt"  # a KeyboardInterrupt says nothing of itself
        echo(f"run {ctx.run_id} interrupted ({why}); {state.measured}/{state.planned} samples stored")
        return ctx.finish("interrupted", EXIT_INTERRUPTED, f"interrupted: {why}")
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    _judge(ctx)
    outcome = ctx.finish("completed", EXIT_OK if state.measured == state.planned else EXIT_PARTIAL)
    echo(
        f"run {ctx.run_id} completed: {outcome.measured}/{state.planned} samples measured "
        f"({outcome.coverage:.0%} coverage), {outcome.failed} exceptions"
    )
    return outcome


def _judge(ctx: RunContext) -> None:
    """After the measurements: the logs, the figures only they hold, then gates and rules."""
    store, echo = ctx.store, ctx.echo
    capture_logs_once(store, ctx.campaign, ctx.run_id, ctx.state, echo)  # before judging: gates read load facts
    judge_variants(store, ctx.run_id, echo)  # each variant's arguments against its load's lines
    filled = cache_from_logs(store, ctx.run_id)  # servers without a cache counter (Ollama): the log's task lines
    if filled:
        echo(f"prompt cache: cached tokens of {filled} samples read from the server log")
    evidence.record_runtime_selfreports(store, ctx.run_id)  # Ollama's /api/ps figure per load
    judge_run(store, ctx.run_id, ctx.campaign.gates)
    # the same counts as the article's gate table: measured samples, canaries apart
    echo(gate_counts.summary_line(store.db, ctx.run_id))
    if ctx.campaign.rules:  # after judging: rules read medians of the samples the gates let through
        evaluate_rules(store, ctx.run_id, echo)


@dataclass
class _Walk:
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


def _run_cells(ctx: RunContext, cells: list[PlannedCell]) -> None:
    campaign = ctx.campaign
    walk = _Walk(pin=next((m.name for m in campaign.models if m.pinned), None), canaries_done=not campaign.canaries)
    for position, cell in enumerate(cells):
        if walk.loaded and cell.model != walk.model:
            run_axes(ctx, walk.model, walk.load_id)  # load and depth steps on the model being left, as probes
        if campaign.probes and walk.loaded and cell.model != walk.model:
            # probes run on the model being left, while it is loaded: no load of their own
            run_model_probes(ctx.store, ctx.backend, campaign, ctx.run_id, walk.model, ctx.model_ids[walk.model],
                             ctx.echo)
        if cell.pinned and not walk.canaries_done and walk.loaded and walk.model != walk.pin:
            # canaries run before the pin is touched: they may evict a model, so never on the pin
            # itself (a plan of the pin alone runs them after its cells, with no eviction)
            run_canaries(ctx.store, ctx.backend, campaign, ctx.run_id, walk.model, ctx.model_ids[walk.model],
                         position=position, echo=ctx.echo, load_id=walk.load_id)
            walk.canaries_done = True
        cell_id = ctx.store.insert(
            "cells",
            {
                "run_id": ctx.run_id,
                "model_id": ctx.model_ids[cell.model],
                "position": position,
                "prompt_class": cell.prompt_class,
                "reasoning": int(cell.reasoning),
                "max_tokens": campaign.max_tokens,
                "repetitions": cell.repetitions,
                "pinned": int(cell.pinned),
                "kind": "measure",
            },
        )
        if cell.model != walk.model:
            if walk.load_id is not None:
                ctx.store.update("loads", walk.load_id, {"ended_at": utcnow(), "end_reason": "next model"})
            walk.load_id = load_for_cell(ctx, cell.model, walk.pin, walk.refused)
            walk.model = cell.model
        if cell.model in walk.refused:
            walk.done += refused_samples(ctx.store, ctx.run_id, cell_id, cell, walk.load_id, walk.refused[cell.model])
            ctx.state.failed += cell.repetitions
            ctx.echo(f"[{walk.done}/{ctx.state.planned}] {cell.model} {cell.prompt_class}: {cell.repetitions} "
                     f"samples not taken (load refused)")
            continue
        _measure_cell(ctx, cell, cell_id, walk)
    if walk.loaded:
        run_axes(ctx, walk.model, walk.load_id)
    if campaign.probes and walk.loaded:
        run_model_probes(ctx.store, ctx.backend, campaign, ctx.run_id, walk.model, ctx.model_ids[walk.model], ctx.echo)
    if not walk.canaries_done and walk.loaded:
        pinned = any(c.pinned and c.model == walk.model for c in cells)
        run_canaries(ctx.store, ctx.backend, campaign, ctx.run_id, walk.model, ctx.model_ids[walk.model],
                     position=len(cells), echo=ctx.echo, allow_evict=not pinned, load_id=walk.load_id)
    if walk.load_id is not None:
        ctx.store.update("loads", walk.load_id, {"ended_at": utcnow(), "end_reason": "run ended"})


def _variant_cells(ctx: RunContext, name: str, load_id: int | None, not_taken: tuple[str, str] | None) -> None:
    """A variant's cells (its model's prompt classes and reasoning settings), on the load just made.

    ``ctx`` speaks to the variant's own server; ``not_taken``: the variant was not loaded, so its
    samples are stored as not sent, with the reason.
    """
    campaign = ctx.campaign
    settings = campaign.sections["variants"]
    walk = _Walk(pin=None, canaries_done=True, model=name, load_id=load_id,
                 done=ctx.state.measured + ctx.state.failed)
    position = ctx.store.db.execute("select coalesce(max(position), -1) + 1 from cells where run_id = ?",
                                    [ctx.run_id]).fetchone()[0]
    for reasoning in sorted(campaign.reasoning):
        for cls in settings.prompt_classes or campaign.prompt_classes:
            cell = PlannedCell(name, cls, reasoning, settings.repetitions or campaign.repetitions_for(reasoning), False)
            cell_id = ctx.store.insert("cells", {
                "run_id": ctx.run_id, "model_id": ctx.model_ids[name], "position": position,
                "prompt_class": cls, "reasoning": int(reasoning), "max_tokens": campaign.max_tokens,
                "repetitions": cell.repetitions, "pinned": 0, "kind": "measure"})
            position += 1
            if not_taken is not None:
                samples_not_taken(ctx.store, ctx.run_id, cell_id, cell.repetitions, load_id, *not_taken)
                ctx.state.failed += cell.repetitions
                continue
            _measure_cell(ctx, cell, cell_id, walk)


def _measure_cell(ctx: RunContext, cell: PlannedCell, cell_id: int, walk: _Walk) -> None:
    """The cell's repetitions, with the server's counters (and the embedding probe) before and after."""
    campaign, backend = ctx.campaign, ctx.backend
    checks = dict(embedding_url=campaign.embedding_url, embedding_model=campaign.embedding_model)
    cellchecks.snapshot(ctx.store, backend, cell_id, cell.model, "before", **checks)
    prompt_tokens = campaign.prompt_tokens[cell.prompt_class]
    for rep in range(1, cell.repetitions + 1):
        walk.done += 1
        label = (
            f"[{walk.done}/{ctx.state.planned}] {cell.model} {cell.prompt_class} "
            f"reasoning={'on' if cell.reasoning else 'off'} rep {rep}/{cell.repetitions}"
        )
        taken = take_sample(ctx.store, backend, SampleRequest(
            ctx.run_id, cell_id, ctx.model_ids[cell.model], cell.model, rep,
            lambda nonce: build_prompt(prompt_tokens, nonce), campaign.max_tokens, cell.reasoning,
            load_id=walk.load_id,
        ))
        if taken.load_id is not None:
            walk.load_id = taken.load_id
            child = router_child_pid(backend.url, cell.model) if backend.is_router() else None
            if child:
                ctx.store.update("loads", walk.load_id, {"pid": child})
            ctx.mem.after_load(walk.load_id, pid=child, arg=backend.runner_arg(cell.model))
        if taken.ok:
            ctx.state.measured += 1
        else:
            ctx.state.failed += 1
        ctx.echo(f"{label}: {taken.text}")
        if not taken.ok and note_crash(ctx, walk.load_id, cell.model):
            walk.load_id = None  # its process is gone: the router's next load of it is a new load
    cellchecks.snapshot(ctx.store, backend, cell_id, cell.model, "after", **checks)
    ctx.mem.end_cell(cell_id, walk.load_id)
    sync_point(ctx.store)
