"""The runner: a run as phases -- start; per model enter, cells, leave; after the cells; judge; finish.

The cells are walked in the order that needs the fewest loads, each model
loaded once and every sample stored as it is taken; where the server keeps
every model loaded at once, the repetitions go round-robin across the models
(:mod:`order`), so that the machine's speed at a moment is not one model's. Everything else a run
does (memory capture, load and depth steps, probes, canaries, variants, the
fit test) is a participant (:mod:`participants`) that the phases call; the
cell loop names none of them. A run's own record -- its frozen campaign, its
row, the status, exit code and coverage it ends with -- is kept by
:mod:`run_record`, its loads by :mod:`run_loads`. Every step reads one
:class:`RunContext`.

In short, ``runner.py``, ``run_context.py``, ``participants.py``: a run as phases: *start*
(the server's properties, the models registered); per model *enter* (load it, or store why it was
refused beside the pin), its *cells*, *leave*; *after the cells*; *judge* (the logs captured, then
gates and rules); *finish* (``run/record.py``). Everything else a run does is a participant in
``run/participants.py`` (memory capture, the ``[load]``/``[depth]`` steps, probes, canaries, variants,
the fit test, ``[quality]``), each overriding the phases it takes part in (``planned``, ``start``,
``loaded``, ``cell_done``, ``leave``, ``after_cells``, ``judge``, ``stop``); the cell loop calls
phases, never a participant by name, and the "model left" work (``runner._leave``) is written once
for a model change and the run's end. **The order of the main cells** (``campaign/order.py``, decided from
the backend kind and the server's ``/props``, so the report says the same reason from the stored
rows): where a llama-server router keeps every model of the campaign loaded at once
(``max_instances`` at least the number of models), ``runner._run_interleaved`` loads every model
first (the plan's order, the pin last) and takes per reasoning setting and prompt class repetition 1
of each model's cell, then repetition 2, ... (one cell per model open at a time, so a router's
per-model ``/metrics`` around a cell count its requests only), then leaves the models in the same
order (their load and depth steps, probes and canaries still run model by model); elsewhere the
models are measured in blocks. A measurement in blocks confounds model with time: a slower moment of
the machine falls on one model. The run prints ``order: ...`` with the reason. ``RunContext``,
``PlannedCell`` and ``Walk`` live in ``run/context.py``, so the steps name their types without
importing the runner. ``tests/test_import_layers.py`` holds the run side's order (record and
context; participants' steps; participants; runner; service; every other daemon module is a library
importing none of them)
"""

from __future__ import annotations

import signal
from typing import Callable

from cardproof.marks import N_
from cardproof.daemon.run import cellchecks, gate_counts
from cardproof.daemon.store import liveness
from cardproof.daemon.backends import Backend, BackendError, backend_for, evidence
from cardproof.daemon.campaign.model import Campaign
from cardproof.daemon.run.judge import judge_run
from cardproof.daemon.logs import LogSourceError, capture_file
from cardproof.daemon.logs.requests import cache_from_logs
from cardproof.daemon.campaign.order import interleave
from cardproof.daemon.run.participants import PARTICIPANTS
from cardproof.daemon.server.prompts import build_prompt
from cardproof.daemon.store.redact import public_url
from cardproof.daemon.campaign.rules.outcome import evaluate_rules
from cardproof.daemon.run.loads import (load_for_cell, note_crash, register_models, router_child_pid,
                                        samples_not_sent)
from cardproof.daemon.run.context import PlannedCell, RunContext, Walk
from cardproof.daemon.run.record import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, RunOutcome,
                                         RunState, capture_logs_once, measuring_commits, record_models,
                                         register_campaign, start_run, sync_point)
from cardproof.daemon.run.sampling import SampleRequest, take_sample
from cardproof.daemon.store import Store, StoreError, dumps, utcnow

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
    energy_sources=None,
) -> RunOutcome:
    """Run ``campaign`` against its server, storing every sample as it is taken.

    ``memory_source`` replaces the NVML reader, ``energy_sources`` the machine's energy counters
    (tests: recorded readings and counters).
    """
    own_backend = backend is None
    backend = backend or backend_for(campaign)
    try:
        # held until the run's status is written; any other end leaves it unlocked: proof of an unfinished run
        with liveness.RunLock(store.path) as lock:
            cells = plan_cells(campaign)
            state = RunState(planned=sum(c.repetitions for c in cells)
                             + sum(p.planned(campaign) for p in PARTICIPANTS))
            run_id = start_run(store, campaign, state.planned, echo, lock)
            ctx = RunContext(store, campaign, backend, echo, run_id, state, memory_source, lock,
                             energy_sources=energy_sources)
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
        record_models(store, ctx.run_id, ctx.model_ids, echo)
        try:
            for p in PARTICIPANTS:
                p.start(ctx)
            interleaved, why = interleave(campaign.backend, props, len(campaign.models))
            echo(f"order: {'interleaved across the models' if interleaved else 'one model after the other'}: "
                 f"{why.english()}")
            with measuring_commits(store):
                _run_cells(ctx, cells, interleaved)
                for p in PARTICIPANTS:
                    p.after_cells(ctx, _variant_cells)
        finally:
            for p in PARTICIPANTS:
                p.stop(ctx)
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
    for p in PARTICIPANTS:
        p.judge(ctx)
    filled = cache_from_logs(store, ctx.run_id)  # servers without a cache counter (Ollama): the log's task lines
    if filled:
        echo(f"prompt cache: cached tokens of {filled} samples read from the server log")
    evidence.record_runtime_selfreports(store, ctx.run_id)  # Ollama's /api/ps figure per load
    judge_run(store, ctx.run_id, ctx.campaign.gates)
    # the same counts as the article's gate table: measured samples, canaries apart
    echo(gate_counts.summary_line(store.db, ctx.run_id))
    if ctx.campaign.rules:  # after judging: rules read medians of the samples the gates let through
        evaluate_rules(store, ctx.run_id, echo)


def _run_cells(ctx: RunContext, cells: list[PlannedCell], interleaved: bool = False) -> None:
    """Per model: enter (load it, or store why it was refused beside the pin), its cells, leave.

    ``interleaved``: every model is entered first and the cells' repetitions go round-robin across the
    models (:func:`_run_interleaved`); the models are then left in the same order.
    """
    walk = Walk(pin=next((m.name for m in ctx.campaign.models if m.pinned), None),
                canaries_done=not ctx.campaign.canaries)
    if interleaved:
        _run_interleaved(ctx, cells, walk)
        return
    for position, cell in enumerate(cells):
        if cell.model != walk.model:
            _leave(ctx, walk, cell, position, N_("next model"))
        cell_id = _cell_row(ctx, cell, position)
        if cell.model != walk.model:
            walk.load_id = load_for_cell(ctx, cell.model, walk.pin, walk.refused)
            walk.model = cell.model
        if cell.model in walk.refused:
            _not_taken(ctx, cell, cell_id, walk)
            continue
        _measure_cell(ctx, cell, cell_id, walk)
    _leave(ctx, walk, None, len(cells), N_("run ended"))


def _not_taken(ctx: RunContext, cell: PlannedCell, cell_id: int, walk: Walk) -> None:
    walk.done += samples_not_sent(ctx.store, ctx.run_id, cell_id, cell.repetitions, walk.load_id, "refused",
                                  walk.refused[cell.model])
    ctx.state.failed += cell.repetitions
    ctx.echo(f"[{walk.done}/{ctx.state.planned}] {cell.model} {cell.prompt_class}: {cell.repetitions} "
             f"samples not taken (load refused)")


def _run_interleaved(ctx: RunContext, cells: list[PlannedCell], walk: Walk) -> None:
    """Every model loaded in the plan's order (the pin last), then per reasoning setting and prompt class
    repetition 1 of each model's cell in turn, repetition 2, ...: a slower moment of the machine falls on
    every model alike. One cell per model is open at a time, so the counters read around it (a router's
    ``/metrics`` of that model) count its own requests only. Then each model is left, in the same order.
    """
    models = list(dict.fromkeys(c.model for c in cells))
    walks = {}
    for m in models:
        load_id = load_for_cell(ctx, m, walk.pin, walk.refused)
        walks[m] = Walk(walk.pin, walk.canaries_done, model=m, load_id=load_id, refused=walk.refused)
    groups: dict[tuple[bool, str], list[PlannedCell]] = {}
    for cell in cells:
        groups.setdefault((cell.reasoning, cell.prompt_class), []).append(cell)
    position = 0
    for group in groups.values():
        opened = []
        for cell in group:
            cell_id = _cell_row(ctx, cell, position)
            position += 1
            if cell.model in walk.refused:
                _not_taken(ctx, cell, cell_id, walk)
                continue
            _open_cell(ctx, cell, cell_id, walks[cell.model].load_id)
            opened.append((cell, cell_id, walks[cell.model]))
        for rep in range(1, max((c.repetitions for c, _, _ in opened), default=0) + 1):
            for cell, cell_id, own in opened:
                if rep <= cell.repetitions:
                    own.done = walk.done  # one count of the run's samples across the models' walks
                    _take(ctx, cell, cell_id, own, rep)
                    walk.done = own.done
        for cell, cell_id, own in opened:
            _close_cell(ctx, cell, cell_id, own)
    for i, m in enumerate(models):
        own = walks[m]
        own.canaries_done = walk.canaries_done
        following = next((c for c in cells if c.model == models[i + 1]), None) if i + 1 < len(models) else None
        _leave(ctx, own, following, position, N_("next model") if following else N_("run ended"))
        walk.canaries_done = own.canaries_done


def _leave(ctx: RunContext, walk: Walk, next_cell: PlannedCell | None, position: int, why: str) -> None:
    """The model being left: every participant's work on it while it is loaded, then its load ends."""
    if walk.model is None:
        return
    for p in PARTICIPANTS:
        p.leave(ctx, walk, next_cell, position)
    if walk.load_id is not None:
        ctx.store.update("loads", walk.load_id, {"ended_at": utcnow(), "end_reason": why})


def _cell_row(ctx: RunContext, cell: PlannedCell, position: int) -> int:
    return ctx.store.insert("cells", {
        "run_id": ctx.run_id, "model_id": ctx.model_ids[cell.model], "position": position,
        "prompt_class": cell.prompt_class, "reasoning": int(cell.reasoning), "max_tokens": ctx.campaign.max_tokens,
        "repetitions": cell.repetitions, "pinned": int(cell.pinned), "kind": "measure"})


def _variant_cells(ctx: RunContext, name: str, load_id: int | None, not_taken: tuple[str, str] | None) -> None:
    """A variant's cells (its model's prompt classes and reasoning settings), on the load just made.

    ``ctx`` speaks to the variant's own server; ``not_taken``: the variant was not loaded, so its
    samples are stored as not sent, with the reason.
    """
    campaign = ctx.campaign
    settings = campaign.sections["variants"]
    walk = Walk(pin=None, canaries_done=True, model=name, load_id=load_id,
                done=ctx.state.measured + ctx.state.failed)
    position = ctx.store.db.execute("select coalesce(max(position), -1) + 1 from cells where run_id = ?",
                                    [ctx.run_id]).fetchone()[0]
    for reasoning in sorted(campaign.reasoning):
        for cls in settings.prompt_classes or campaign.prompt_classes:
            cell = PlannedCell(name, cls, reasoning, settings.repetitions or campaign.repetitions_for(reasoning), False)
            cell_id = _cell_row(ctx, cell, position)
            position += 1
            if not_taken is not None:
                samples_not_sent(ctx.store, ctx.run_id, cell_id, cell.repetitions, load_id, *not_taken)
                ctx.state.failed += cell.repetitions
                continue
            _measure_cell(ctx, cell, cell_id, walk)


def _measure_cell(ctx: RunContext, cell: PlannedCell, cell_id: int, walk: Walk) -> None:
    """The cell's repetitions, with the server's counters (and the embedding probe) before and after."""
    _open_cell(ctx, cell, cell_id, walk.load_id)
    for rep in range(1, cell.repetitions + 1):
        _take(ctx, cell, cell_id, walk, rep)
    _close_cell(ctx, cell, cell_id, walk)


def _open_cell(ctx: RunContext, cell: PlannedCell, cell_id: int, load_id: int | None) -> None:
    """The server's counters (and the embedding probe) before the cell, and every participant's start of it."""
    campaign = ctx.campaign
    cellchecks.snapshot(ctx.store, ctx.backend, cell_id, cell.model, "before", embedding_url=campaign.embedding_url,
                        embedding_model=campaign.embedding_model)
    for p in PARTICIPANTS:
        p.cell_start(ctx, cell_id, load_id)


def _take(ctx: RunContext, cell: PlannedCell, cell_id: int, walk: Walk, rep: int) -> None:
    """One repetition of ``cell`` on ``walk``'s load (a load inside the request becomes the walk's load)."""
    campaign, backend = ctx.campaign, ctx.backend
    prompt_tokens = campaign.prompt_tokens[cell.prompt_class]
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
        for p in PARTICIPANTS:
            p.loaded(ctx, walk.load_id, child, cell.model)
    if taken.ok:
        ctx.state.measured += 1
    else:
        ctx.state.failed += 1
    ctx.echo(f"{label}: {taken.text}")
    if not taken.ok and note_crash(ctx, walk.load_id, cell.model):
        walk.load_id = None  # its process is gone: the router's next load of it is a new load


def _close_cell(ctx: RunContext, cell: PlannedCell, cell_id: int, walk: Walk) -> None:
    campaign = ctx.campaign
    cellchecks.snapshot(ctx.store, ctx.backend, cell_id, cell.model, "after", embedding_url=campaign.embedding_url,
                        embedding_model=campaign.embedding_model)
    for p in PARTICIPANTS:
        p.cell_done(ctx, cell_id, walk.load_id)
    sync_point(ctx.store)
