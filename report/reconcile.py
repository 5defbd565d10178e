"""Figures that look as if they disagree, reconciled: each side says which requests or which clock it counts.

Two figures about the same thing from different sources (cardproof's clock
and the server's, the measured samples and every request the log saw, the
runtime's self-report for the cards and its buffers in host memory) must
never stand side by side in silence. Each reconciliation is a message id
with parameters (rendered like a caveat) and the evidence it rests on.
"""

from __future__ import annotations

import statistics

from cardproof.marks import N_, NP_
from .caveats.base import Caveat

_BUFFERS = ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib", "output_buffer_mib", "rs_buffer_mib")


def _loads_by_model(view: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for ld in (view.get("evidence") or {}).get("loads", []):
        out.setdefault(ld.get("model"), []).append(ld)
    return out


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def reconciliations(view: dict) -> list[Caveat]:
    """Load time (client vs server clock), draft acceptance (measured samples vs every logged request),
    self-reported card memory vs buffers in host memory."""
    out = []
    by_model = _loads_by_model(view)
    measured_ids = {ld["id"] for ld in view.get("loads", []) if ld.get("measured")}
    for m in view["models"]:
        logs = by_model.get(m["name"], [])
        # load time: the same measured loads, two clocks
        server = [ld["facts"]["load_seconds"] for ld in logs
                  if ld["id"] in measured_ids and _num(ld["facts"].get("load_seconds"))]
        if m.get("load") and server:
            out.append(Caveat(
                "reconcile", "info", N_("Load time: two clocks"),
                N_("{model}: {client} s on cardproof's clock (from the load request until the server reported the "
                   "model ready; measured loads: {n}) against {server} s in the server log (its own clock since the "
                   "process started, at \"model loaded\"). They count different spans of the same loads: the "
                   "process start and the readiness poll lie between them."),
                {"model": m["name"], "client": ("num2", m["load"].median), "server": ("num2", statistics.median(server)),
                 "n": ("int", m["load"].n)}))
        # draft acceptance: measured samples against every request the log saw
        acc = gen = n = 0
        for c in m["cells"].values():
            for s in c["samples"]:
                if s.get("draft_tokens"):
                    acc, gen, n = acc + (s.get("draft_accepted") or 0), gen + s["draft_tokens"], n + 1
        logged = [ld["facts"]["draft_acceptance"] for ld in logs if isinstance(ld["facts"].get("draft_acceptance"), dict)]
        if gen and logged:
            l_acc = sum(x.get("accepted") or 0 for x in logged)
            l_gen = sum(x.get("generated") or 0 for x in logged)
            l_req = sum(x.get("requests") or 0 for x in logged)
            if (l_acc, l_gen) != (acc, gen):
                out.append(Caveat(
                    "reconcile", "info", N_("Draft acceptance: two counts"),
                    NP_("{model}: {acc} of {gen} draft tokens accepted over {n} measured request (the answers' "
                        "counters); the server log counts {l_acc} of {l_gen} over {l_req} requests, because it logs "
                        "every request of the load: canaries, probes and warm-ups included.",
                        "{model}: {acc} of {gen} draft tokens accepted over {n} measured requests (the answers' "
                        "counters); the server log counts {l_acc} of {l_gen} over {l_req} requests, because it logs "
                        "every request of the load: canaries, probes and warm-ups included."),
                    {"model": m["name"], "acc": ("int", acc), "gen": ("int", gen), "n": ("int", n),
                     "l_acc": ("int", l_acc), "l_gen": ("int", l_gen), "l_req": ("int", l_req)}))
    # the runtime's self-report counts the cards; on a CPU run its buffers are in host memory
    mem = view.get("memory") or {}
    for r in mem.get("loads", []):
        if r.get("selfreport_mib") is None or r.get("card_mib") is not None:
            continue
        host = 0.0
        # this load's own buffers: another load of the model (a canary's reload) holds its own copies
        for ld in by_model.get(r.get("model"), []):
            if ld["id"] != r.get("load_id"):
                continue
            for name, v in ld["facts"].items():
                if name in _BUFFERS or (name.startswith("draft_") and name.endswith("_buffer_mib")):
                    if isinstance(v, dict):
                        host += sum(x for d, x in v.items() if _num(x) and "CPU" in str(d).upper())
        if host > 0 and (r["selfreport_mib"] or 0) < host:
            out.append(Caveat(
                "reconcile", "info", N_("Memory: the cards against host memory"),
                N_("{model}: the runtime reports {reported} MiB for the cards, while its log lists {host} MiB of "
                   "buffers in host memory (CPU). Both are right: the self-report counts card memory only, and on "
                   "this run the model lived in host memory."),
                {"model": r.get("model"), "reported": ("int", r["selfreport_mib"] or 0), "host": ("int", host)}))
    return out
