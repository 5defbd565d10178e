"""``not_on_card``: layers left off the GPU, or no GPU at all, so the rates are not a card's."""

import json

from cardproof.marks import N_
from ..backends import evidence
from ..logs.parsers.llamacpp import parse_offloaded
from .base import Canary, Gate, GateOutcome, JudgedRun, Said, SampleContext

# Published llama-server output with one layer left on the CPU:
# ggml-org/llama.cpp issue #24183 ("Off-by-one-errror causes one layer to not go on the GPU").
RECORDED_PARTIAL_OFFLOAD = "0.03.232.050 I load_tensors: offloaded 65/66 layers to GPU"
RECORDED_PARTIAL_OFFLOAD_SOURCE = "https://github.com/ggml-org/llama.cpp/issues/24183"


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    off, total = ctx.facts.get("offloaded_layers"), ctx.facts.get("total_layers")
    if isinstance(off, (int, float)) and isinstance(total, (int, float)) and total:
        share = off / total
        layers = Said("offloaded {offloaded:.0f}/{total:.0f} layers", {"offloaded": off, "total": total})
        if share < 1.0:
            return GateOutcome(True, share, layers)
        if ctx.gpu_share is None or ctx.gpu_share >= 1.0:
            return GateOutcome(False, share, layers)
    if ctx.gpu_share is not None:
        return GateOutcome(ctx.gpu_share < 1.0, ctx.gpu_share,
                           Said("runtime reports {share:.0%} on the GPU", {"share": ctx.gpu_share}))
    if not ctx.gpu_available:
        # the inventory's reason is the driver's own words (evidence), quoted as it is
        why = ctx.gpu_reason if ctx.gpu_reason else Said("NVML sees none")
        return GateOutcome(True, 0.0, Said("no GPU: {reason}; the model runs on the CPU", {"reason": why}))
    return GateOutcome(None, None, Said("no offload facts and no GPU share for this load"))


def load_facts(store, load_id: int | None) -> dict:
    """The facts attributed to one load: name -> value, or name -> {device: value}."""
    if not load_id or "facts" not in store.db.table_names():
        return {}
    out: dict = {}
    for f in store.db.query("select name, device, value_num, value_text from facts where load_id = ? order by id",
                            [load_id]):
        value = f["value_num"] if f["value_num"] is not None else f["value_text"]
        if f["device"]:
            out.setdefault(f["name"], {})[f["device"]] = value
        else:
            out[f["name"]] = value
    return out


def gather(judged: JudgedRun):
    """The load's facts from the log, the run's GPU inventory and the runtime's own GPU share (Ollama)."""
    gpus = json.loads(judged.run["gpus_json"] or "{}")
    facts: dict = {}

    def per_sample(sample: dict, response: dict) -> dict:
        if sample["load_id"] not in facts:
            facts[sample["load_id"]] = load_facts(judged.store, sample["load_id"])
        return {"facts": facts[sample["load_id"]], "gpu_available": bool(gpus.get("available")),
                "gpu_reason": gpus.get("reason"), "gpu_share": evidence.gpu_share(response)}

    return per_sample


def provoke(run) -> None:
    # offload cannot be changed per request -> a recorded line
    run.plan("not_on_card", result=None,
             reason=Said("offload cannot be changed per request; recorded line from {source}",
                         {"source": RECORDED_PARTIAL_OFFLOAD_SOURCE}),
             detail={"recorded_line": RECORDED_PARTIAL_OFFLOAD})


def recorded(detail: dict) -> SampleContext | None:
    """The recorded line read by the log's own offload parser, as the facts of a load on a card."""
    facts = {f.name: f.value_num for f in parse_offloaded(str(detail.get("recorded_line", "")))}
    if not facts:
        return None
    return SampleContext(sample={}, response={}, max_tokens=0, facts=facts, gpu_available=True)


GATE = Gate(
    "not_on_card",
    N_("offloaded layers below total, or GPU share below 100 %"),
    check,
    order=40,
    canary=Canary(provoke, order=80, recorded=recorded),
    gather=gather,
)
