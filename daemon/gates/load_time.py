"""``load_time``: a model load happened inside the measured request, so its times include the load."""

import time

import httpx

from cardproof.marks import N_
from ..backends import BackendError, evidence
from .base import Canary, Gate, GateOutcome, JudgedRun, Said, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    if ctx.load_inside_seconds is not None:
        # any load inside a measured request spoils it, however short
        return GateOutcome(True, ctx.load_inside_seconds, Said("model loaded inside the request ({seconds:.2f} s)",
                                                               {"seconds": ctx.load_inside_seconds}))
    if ctx.load_duration_seconds is not None:
        return GateOutcome(ctx.load_duration_seconds >= threshold, ctx.load_duration_seconds,
                           Said("load time reported by the runtime: {seconds:.2f} s",
                                {"seconds": ctx.load_duration_seconds}))
    return GateOutcome(False, 0.0, Said("no load inside the request"))


def gather(judged: JudgedRun):
    """Loads the runner saw inside a request (router, swap proxy), and the runtime's own load_duration (Ollama)."""
    inside = {ld["sample_id"]: ld["load_seconds"] for ld in judged.store.db.query(
        "select sample_id, load_seconds from loads where run_id = ? and trigger = 'inside_request'", [judged.run["id"]])}

    def per_sample(sample: dict, response: dict) -> dict:
        return {"load_inside_seconds": inside.get(sample["id"]),
                "load_duration_seconds": evidence.load_duration_seconds(response)}

    return per_sample


def provoke(run) -> None:
    # evict the model, so the next request has to load it
    if not run.allow_evict:
        run.plan("load_time", result="not_run",
                 reason=Said("{model} is the pinned model and is never unloaded by cardproof", {"model": run.model}))
    elif run.backend.is_router():
        try:
            run.backend.unload(run.model)
            for _ in range(200):
                if run.backend.model_status(run.model) != "loaded":
                    break
                time.sleep(0.05)
            _, t = run.sample("load_time")
            run.plan("load_time", sample_id=t.sample_id, detail={"evicted": run.model})
        except (BackendError, httpx.HTTPError) as exc:
            run.plan("load_time", result="not_run", reason=Said("eviction failed: {error}", {"error": str(exc)}))
    else:
        run.plan("load_time", result="not_run", reason=Said("single-model server: nothing can be evicted"))


GATE = Gate(
    "load_time",
    N_("a model load happened inside the measured request"),
    check,
    default_threshold=1.0,
    threshold_unit="s",
    order=10,
    # after every canary that needs the model loaded: this one evicts it
    canary=Canary(provoke, order=70),
    gather=gather,
)
