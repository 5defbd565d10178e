"""The gate registry: one small module per gate, registered here in one place."""

from __future__ import annotations

from . import (
    counter_sanity,
    embedding_down,
    empty_answer,
    foreign_load,
    length_limit,
    load_time,
    not_on_card,
    prompt_cache_hit,
)
from .base import Gate, GateConfig, GateOutcome, SampleContext

GATES: dict[str, Gate] = {
    m.GATE.name: m.GATE
    for m in (
        load_time,
        length_limit,
        empty_answer,
        not_on_card,
        embedding_down,
        foreign_load,
        prompt_cache_hit,
        counter_sanity,
    )
}


def default_config() -> dict[str, GateConfig]:
    return {name: GateConfig(g.default_threshold, g.default_exclude) for name, g in GATES.items()}


def evaluate(ctx: SampleContext, config: dict[str, GateConfig]) -> list[dict]:
    """One result per gate; a gate that raises is recorded as its own exception."""
    out = []
    for name, gate in GATES.items():
        cfg = config.get(name) or GateConfig(gate.default_threshold, gate.default_exclude)
        row = {"gate": name, "threshold": cfg.threshold}
        try:
            res = gate.check(ctx, cfg.threshold)
        except Exception as exc:  # a broken gate is not a gate that did not fire
            row.update({"fired": None, "error_text": f"{type(exc).__name__}: {exc}"})
        else:
            row.update(
                {
                    "fired": None if res.fired is None else int(res.fired),
                    "observed": res.observed,
                    "observed_text": res.observed_text,
                }
            )
        out.append(row)
    return out


__all__ = ["GATES", "Gate", "GateConfig", "GateOutcome", "SampleContext", "default_config", "evaluate"]
