"""Run a campaign's probes on one model while it is loaded, and store every attempt.

Called by the runner before it leaves a model (and after the last one), so
probes never cause a load of their own and never touch a pinned model that
is not the current one (principle 12). Each probe is asked ``repeat`` times
on identical input; attempts that disagree mark the probe unstable.
"""

from __future__ import annotations

import traceback
from typing import Callable

import httpx

from cardproof.daemon.backends import BackendError
from cardproof.daemon.store import Store, dumps, utcnow
from cardproof.daemon.probes import PROBES
from cardproof.daemon.probes.base import (ProbeContext, Unit, apply_declaration, error_detail, request_sha256,
                                          summarise)
from cardproof.daemon.probes.capabilities import read_declared

# A probe's own bug must not lose a measurement run (principle 4: it becomes
# an ERROR with its traceback); interrupts are not among these and pass through.
_PROBE_BUGS = (BackendError, httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError, IndexError,
               OSError, UnicodeError, ZeroDivisionError)


def _row(run_id: int, model_id: int, probe: str, attempt: int, u: Unit) -> dict:
    requests = u.exchange.get("requests") or []
    return {
        "run_id": run_id,
        "model_id": model_id,
        "probe": probe,
        "variant": u.variant,
        "attempt": attempt,
        "verdict": u.verdict,
        "raw_verdict": u.raw_verdict or u.verdict,
        "arm": u.arm,
        "declared": None if u.declared is None else int(u.declared),
        "graded": int(u.graded),
        "duration_ms": u.duration_ms,
        "request_sha256": request_sha256(requests[0]) if requests else None,
        "exchange_json": dumps(u.exchange),
        "detail_json": dumps(u.detail),
        "at": utcnow(),
    }


def run_model_probes(store: Store, backend, campaign, run_id: int, model: str, model_id: int,
                     echo: Callable[[str], None] = print) -> dict[str, dict]:
    """Probe ``model`` with every probe the campaign names; return probe -> summary."""
    settings = campaign.probes
    caps = read_declared(backend, model)
    store.insert("capabilities", {"run_id": run_id, "model_id": model_id, "source": caps["source"],
                                  "json": dumps(caps), "at": utcnow()})
    declared_text = ", ".join(f"{c}={'?' if v is None else ('yes' if v else 'no')}" for c, v in caps["declared"].items())
    echo(f"probes on {model}: declared {declared_text} ({caps['source']})")
    ctx = ProbeContext(backend, model, caps["declared"], max_tokens=settings.max_tokens,
                       reasoning=settings.reasoning, code_timeout_s=settings.code_timeout_s)
    summaries = {}
    for name in settings.run:
        probe = PROBES[name]
        declared = caps["declared"].get(probe.capability) if probe.capability else None
        rows = []
        for attempt in range(1, settings.repeat + 1):
            echo(f"probe {name} on {model}: attempt {attempt}/{settings.repeat} ...")
            try:
                units = probe.run(ctx)
            except _PROBE_BUGS as exc:
                units = [Unit("*", "ERROR", f"probe_raised:{type(exc).__name__}", 0.0,
                              {"error": traceback.format_exc(limit=6)[-2000:]}, detail=error_detail(exc))]
            for u in units:
                if probe.capability:
                    apply_declaration(u, declared)
                row = _row(run_id, model_id, name, attempt, u)
                store.insert("probe_results", row)
                rows.append(row)
        s = summarise(rows)
        summaries[name] = s
        unstable = f", unstable: {', '.join(s['unstable'])}" if s["unstable"] else ""
        echo(f"probe {name} on {model}: {s['verdict']} {s['passed']}/{s['total']} ({s['arm']}){unstable}")
    return summaries
