"""``embedding_down``: the co-resident embedding model did not answer around the cell."""

import json
import tomllib

from cardproof.marks import N_
from cardproof.daemon.server.llamacpp import free_port
from .base import Canary, Gate, GateOutcome, JudgedRun, Said, SampleContext


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    if not ctx.embedding_configured:
        return GateOutcome(False, None, Said("no embedding endpoint configured"))
    failed = [p for p in ctx.embedding if not p.get("ok")]
    if not ctx.embedding:
        return GateOutcome(None, None, Said("embedding endpoint configured but never probed"))
    return GateOutcome(bool(failed), float(len(failed)), [_probe(p) for p in ctx.embedding])


def _probe(p: dict) -> Said:
    """One probe around the cell; a phase other than cardproof's two is shown as the text it is."""
    phase, ok = p.get("phase"), p.get("ok")
    error = str(p.get("error") or "—")  # the client's error text: evidence, quoted
    if phase == "before":
        return Said("before the cell: answered") if ok else Said("before the cell: no answer ({error})", {"error": error})
    if phase == "after":
        return Said("after the cell: answered") if ok else Said("after the cell: no answer ({error})", {"error": error})
    if ok:
        return Said("{phase}: answered", {"phase": str(phase)})
    return Said("{phase}: no answer ({error})", {"phase": str(phase), "error": error})


def configured(judged: JudgedRun) -> bool:
    """Whether the run's campaign names an embedding endpoint (``[embedding] url``)."""
    if judged.campaign is not None:
        return judged.campaign.embedding_url is not None
    # a frozen campaign that no longer validates as a whole (an older cardproof's): its [embedding] table alone
    try:
        table = tomllib.loads(judged.campaign_text).get("embedding")
    except (tomllib.TOMLDecodeError, RecursionError):
        return False
    return isinstance(table, dict) and bool(table.get("url"))


def gather(judged: JudgedRun):
    """The embedding probes taken before and after each cell (cell_checks)."""
    probes: dict[int, list[dict]] = {}
    for c in judged.store.db.query(
        "select cell_checks.* from cell_checks join cells on cells.id = cell_id where cells.run_id = ? "
        "and \"check\" = 'embedding' order by cell_checks.id", [judged.run["id"]]):
        v = json.loads(c["value_json"] or "{}")
        probes.setdefault(c["cell_id"], []).append({"phase": c["phase"], "ok": bool(c["ok"]),
                                                    "error": c["error_text"], "url": v.get("url")})
    named = configured(judged)

    def per_sample(sample: dict, response: dict) -> dict:
        # a canary's cell is probed even where the campaign names no endpoint
        return {"embedding": probes.get(sample["cell_id"], []),
                "embedding_configured": named or sample["cell_id"] in probes}

    return per_sample


def provoke(run) -> None:
    # the probe aimed at a closed loopback port
    closed = f"http://127.0.0.1:{free_port()}"
    cid = run.new_cell("embedding_down")
    run.snapshot(cid, "before", embedding_url=closed)
    _, t = run.sample("embedding_down", cell_id=cid)
    run.snapshot(cid, "after", embedding_url=closed)
    run.plan("embedding_down", sample_id=t.sample_id, detail={"embedding_url": closed})


GATE = Gate(
    "embedding_down",
    N_("the co-resident embedding model did not answer around the cell"),
    check,
    order=50,
    canary=Canary(provoke, order=60),
    gather=gather,
)
