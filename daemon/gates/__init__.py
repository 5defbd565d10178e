"""The gate registry, built from the modules in this package.

Every module here other than ``base`` defines ``GATE``, a :class:`Gate`
carrying its check, what it gathers from the store, its defaults, its
canary and its description (an English msgid of the report's catalogue). Adding a gate is adding one
module (and its test); ``GATES`` lists them by ``Gate.order``.

In short, ``gates/``: one module per gate (``daemon/gates/load_time.py`` …), each
declaring ``GATE = Gate(...)`` with its check, defaults, canary and description (an English msgid
marked ``N_()``, German in the ``.po``); the registry is built from the modules
(``cardproof/registry.py``); ``run/judge.py`` runs every sample through every gate; ``run/canaries.py`` runs
each gate's canary. ``busy_host`` judges the machine's CPU time around each cell (``host/load.py``:
``/proc/stat``'s busy time, steal included, less the server's process tree, found as the process
listening on the campaign's port with its children and their reaped children's time, less
cardproof's own process), as a share of a core over the cell's wall time; the readings are
``cell_checks`` rows (``host_cpu``), read innermost by ``cellchecks.snapshot`` so the window holds
the cell's requests; its canary runs a CPU hog (a process of its own) through a canary cell. It
counts only by default: a shared machine is rarely quiet
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
