"""The load and depth steps of one model, run while the runner has it loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardproof.daemon.run.record import sync_point
from cardproof.daemon.run.load.depth import run_depth_step
from cardproof.daemon.run.load.rate import run_rate_step
from cardproof.daemon.store.stats import step_figures
from cardproof.daemon.run.load.steps import server_shape
from cardproof.daemon.run.load.sweep import run_stream_step

if TYPE_CHECKING:
    from cardproof.daemon.run.context import RunContext


def run_axes(ctx: "RunContext", model: str, load_id: int | None) -> None:
    """``[load]`` then ``[depth]`` steps on ``model``; each request counts toward the run's coverage."""
    campaign = ctx.campaign
    if campaign.load is None and campaign.depth is None:
        return
    pinned = any(m.pinned and m.name == model for m in campaign.models)
    common = dict(run_id=ctx.run_id, model=model, model_id=ctx.model_ids[model], pinned=pinned, load_id=load_id)

    def counted(ok: bool) -> None:
        if ok:
            ctx.state.measured += 1
        else:
            ctx.state.failed += 1

    if campaign.load is not None:
        load = campaign.load
        tokens = campaign.prompt_tokens[load.prompt_class]
        for streams in load.streams or ():
            shape = server_shape(ctx.backend, model)  # asked per step: a server that died says so
            step = run_stream_step(ctx.store, ctx.backend, streams=streams, settings=load, prompt_tokens=tokens,
                                   shape=shape, counted=counted, **common)
            sync_point(ctx.store)
            f = step_figures(ctx.store.db.conn, step)
            queueing = {None: "", 0: "", 1: f", queueing ({streams} streams > {shape.total_slots} slots)"}[
                step["queueing"]]
            ctx.echo(f"load {model} {streams} streams: {f.requests - f.errors}/{f.requests} answered, "
                     f"{_fmt(f.output_tps)} tok/s aggregate, TTFT p50 {_fmt(f.ttft_ms.p50)} ms{queueing}")
        for rate_rps in load.rates or ():
            shape = server_shape(ctx.backend, model)
            step = run_rate_step(ctx.store, ctx.backend, rate_rps=rate_rps, settings=load, prompt_tokens=tokens,
                                 shape=shape, counted=counted, **common)
            sync_point(ctx.store)
            f = step_figures(ctx.store.db.conn, step)
            ctx.echo(f"load {model} {rate_rps:g} requests/s offered (Poisson, seed {load.seed}): "
                     f"{f.requests - f.errors}/{f.requests} answered, {_fmt(f.requests_per_s)} requests/s, "
                     f"{_fmt(f.output_tps)} tok/s aggregate, TTFT p50 {_fmt(f.ttft_ms.p50)} ms, "
                     f"at most {f.max_in_flight if f.max_in_flight is not None else '—'} in flight")
    if campaign.depth is not None:
        for depth_tokens in campaign.depth.tokens:
            shape = server_shape(ctx.backend, model)
            step = run_depth_step(ctx.store, ctx.backend, depth_tokens=depth_tokens, settings=campaign.depth,
                                  shape=shape, counted=counted, **common)
            sync_point(ctx.store)
            if step["refused_reason"]:
                ctx.echo(f"depth {model} {depth_tokens} tokens: refused: {step['refused_reason']}")
                continue
            f = step_figures(ctx.store.db.conn, step)
            ctx.echo(f"depth {model} {depth_tokens} tokens: prompt {_fmt(f.prompt_tokens.p50)} tok, decode "
                     f"{_fmt(f.decode_tps.p50)} tok/s, prefill {_fmt(f.prefill_tps.p50)} tok/s")


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"
