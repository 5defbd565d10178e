"""The gate registry, built from the modules in this package.

Every module here other than ``base`` defines ``GATE``, a :class:`Gate`
carrying its check, what it gathers from the store, its defaults, its
canary and its description (an English msgid of the report's catalogue). Adding a gate is adding one
module (and its test); ``GATES`` lists them by ``Gate.order``.
"""

from __future__ import annotations


from cardproof.registry import declared
from ..store import json_text
from .base import Canary, Gate, GateConfig, GateOutcome, JudgedRun, Said, SampleContext, english, said_json

GATES: dict[str, Gate] = declared(__name__, __path__, {"base"}, "GATE", Gate)


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
                    "observed_text": english(res.observed_text),
                    "observed_json": _dumps(said_json(res.observed_text)),
                }
            )
        out.append(row)
    return out


def _dumps(structured) -> str | None:
    # an observed value may be a server's NaN: stored as standard JSON (store.json_text)
    return None if structured is None else json_text(structured, ensure_ascii=False)


__all__ = ["GATES", "Canary", "Gate", "GateConfig", "GateOutcome", "JudgedRun", "Said", "SampleContext",
           "default_config", "english", "evaluate", "said_json"]
