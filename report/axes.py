"""The article's Load and Context sections: step figures, service level, knee (the charts: axes_charts.py).

Figures come from ``load_steps`` and their samples through
``cardproof.daemon.store.stats`` -- the same code the console line uses --
so a percentile in the article is always a computation over stored rows.
The service level is the one frozen with the campaign (``[load.slo]``, read from\n``campaigns.campaign_json`` as the pass rules read it).
"""

from __future__ import annotations

import sqlite3
import sys

from cardproof.daemon.campaign.frozen import frozen_campaign
from cardproof.daemon.campaign.tables.load import Slo
from cardproof.daemon.campaign.slo import answers_unequal, knee, meets, step_x
from cardproof.daemon.store.stats import StepFigures, rate_digits, run_steps
from cardproof.marks import N_, NP_

from .mdsafe import MD



def frozen_slo(conn, run_id: int) -> Slo | None:
    """``[load.slo]`` of the campaign as the run froze it (parsed once, as the pass rules read it); a run whose
    frozen campaign is unreadable shows no service level, named on stderr."""
    campaign = frozen_campaign(conn, run_id=run_id)
    if campaign is None:
        print(f"run {run_id}: the frozen campaign is not readable, no service level shown", file=sys.stderr)
        return None
    return campaign.load.slo if campaign.load else None


def _row(f: StepFigures, slo: Slo | None) -> dict:
    ok, failed = meets(f, slo) if slo else (None, [])
    return {"f": f, "streams": f.step["streams"], "x": step_x(f), "x_digits": rate_digits(step_x(f)),
            "queueing": f.step["queueing"],
            "slots": f.step["total_slots"], "meets": ok, "failed": failed, "cell": f.step["cell_id"],
            "step": f.step["id"]}


def _swept(figures: list[StepFigures], slo: Slo | None) -> dict:
    """Rows of one model's steps of one axis, the largest step meeting the level, the first beyond it, the knee."""
    rows = [_row(f, slo) for f in figures]
    # a step whose stream count or rate was damaged (read as NULL) is listed, but states no level and no knee
    met = [r for r in rows if r["meets"] and r["x"] is not None]
    best = max(met, key=lambda r: r["x"]) if met else None
    beyond = next((r for r in sorted((r for r in rows if r["x"] is not None), key=lambda r: r["x"])
                   if best and r["x"] > best["x"] and not r["meets"]), None)
    k = knee(figures)
    return {"rows": rows, "best": best, "beyond": beyond, "knee": step_x(k) if k else None,
            "max_at_slo": best["x"] if best else (0 if slo else None),
            "unequal": answers_unequal(figures), "queueing": _queueing(rows)}


def _queueing(rows: list[dict]) -> dict | None:
    """Where streams outnumber the server's slots: from which step on, and what waiting did to TTFT and
    to aggregate throughput against the first step (requests wait for a slot; the step measures the queue)."""
    ordered = sorted((r for r in rows if r["x"] is not None), key=lambda r: r["x"])
    first = ordered[0] if ordered else None
    queued = next((r for r in ordered if r["queueing"]), None)
    if not (first and queued) or queued is first:
        return None
    a, b = first["f"], queued["f"]
    return {"streams": queued["streams"], "slots": queued["slots"], "first": first["streams"],
            "ttft": b.ttft_ms.p50, "ttft_first": a.ttft_ms.p50, "tps": b.output_tps, "tps_first": a.output_tps,
            "step": queued["step"], "step_first": first["step"]}


def axes_view(db, run_id: int) -> dict:
    """Per model: its stream steps and rate steps (with service level and knee) and its depth steps."""
    conn = db.conn if hasattr(db, "conn") else db
    try:
        steps = run_steps(conn, run_id)
    except sqlite3.OperationalError:  # a database from before m015: no steps to show
        steps = []
    slo = frozen_slo(conn, run_id) if any(f.step["axis"] in ("load", "rate") for f in steps) else None
    out: dict = {"load": [], "rate": [], "depth": [], "slo": slo}
    for axis in ("load", "rate", "depth"):
        by_model: dict[str, list[StepFigures]] = {}
        for f in steps:
            if f.step["axis"] == axis:
                by_model.setdefault(f.step.get("model") or "?", []).append(f)
        for model, figures in by_model.items():
            if axis == "depth":
                out["depth"].append({"model": model, "rows": figures})
                continue
            entry = {"model": model, **_swept(figures, slo)}
            entry["knee_digits"] = rate_digits(entry["knee"])
            if axis == "load":
                entry["max_streams_at_slo"] = entry["max_at_slo"]
            out[axis].append(entry)
    return out


KNEE_STREAMS = NP_("Aggregate throughput stops rising at {n} stream: no later step adds 10 % or more.",
                   "Aggregate throughput stops rising at {n} streams: no later step adds 10 % or more.")
KNEE_RATE = NP_("Aggregate throughput stops rising at {rate} request per second offered: no later step adds 10 % or "
                "more.",
                "Aggregate throughput stops rising at {rate} requests per second offered: no later step adds 10 % or "
                "more.")
LEVEL_STREAMS = NP_("Meets the service level up to {n} concurrent stream.",
                    "Meets the service level up to {n} concurrent streams.")
LEVEL_RATE = NP_("Meets the service level up to {rate} request per second.",
                 "Meets the service level up to {rate} requests per second.")
AT_STREAMS = NP_("At {n} stream:", "At {n} streams:")
AT_RATE = NP_("At {rate} request per second:", "At {rate} requests per second:")
# streams outnumber slots here, so never one stream: no plural form needed
QUEUEING = N_("From {n} streams on, the server has {slots}: requests wait for a slot, and the step measures "
              "queueing. At {n} streams the median time to the first token is {ttft} ms against {ttft_first} ms in "
              "the first step ({first}); aggregate throughput {tps} against {tps_first} tok/s.")

# -- charts ------------------------------------------------------------------


def knee_sentence(L, axis: str, e: dict) -> MD:
    """What one model's sweep of ``axis`` says of aggregate throughput: where it stops rising, that it
    still rises, or that its steps' answers differ too much in length to compare it. The Load section
    and a publication's record (report/statements.py) say it with these words."""
    _ = L.gettext
    if e.get("unequal"):
        short, long = e["unequal"]
        return MD(_("The steps' answers differ in length (median {short} to {long} tokens per request): their "
                    "aggregate throughput is not compared, and no knee is stated.").format(
            short=L.num(short, 0), long=L.num(long, 0)))
    if e["knee"] is None:
        return MD(_("Aggregate throughput still rises at the last step: the knee lies beyond it."))
    if axis == "load":
        return MD(L.plural(KNEE_STREAMS, e["knee"]).format(n=L.num(e["knee"], 0)))
    return MD(L.plural(KNEE_RATE, shown_count(L, e["knee"], e["knee_digits"])).format(
        rate=L.num(e["knee"], e["knee_digits"])))


def level_sentence(L, axis: str, best: dict | None) -> MD:
    """How far one model's sweep of ``axis`` meets the service level: the Load section's and a
    publication's same words."""
    if best is None:
        return MD(L.gettext("No step meets the service level."))
    if axis == "load":
        return MD(L.plural(LEVEL_STREAMS, best["streams"]).format(n=L.num(best["streams"], 0)))
    return MD(L.plural(LEVEL_RATE, shown_count(L, best["x"], best["x_digits"])).format(
        rate=L.num(best["x"], best["x_digits"])))


def beyond_words(L, axis: str, beyond: dict) -> MD:
    """``At 4 streams:`` / ``At 2.5 requests per second:``, before what the first step past the level missed."""
    if axis == "load":
        return MD(L.plural(AT_STREAMS, beyond["streams"]).format(n=L.num(beyond["streams"], 0)))
    return MD(L.plural(AT_RATE, shown_count(L, beyond["x"], beyond["x_digits"])).format(
        rate=L.num(beyond["x"], beyond["x_digits"])))


def shown_count(L, value, digits: int):
    """The count a noun agrees with: the value as the page shows it (a rate of 1.04 shown as "1,0" is
    plural, one shown as "1" singular)."""
    shown = L.num(value, digits)
    return 1 if shown == L.num(1, 0) else 0


def queueing_sentence(L, e: dict) -> MD:
    """Where streams outnumber the server's slots, what the steps from there on measure."""
    q = e.get("queueing")
    if not q:
        return MD("")
    return MD(L.gettext(QUEUEING).format(
        n=L.num(q["streams"], 0), slots=L.ngettext("%(num)s slot", "%(num)s slots", q["slots"]),
        first=L.num(q["first"], 0), ttft=L.num(q["ttft"], 0), ttft_first=L.num(q["ttft_first"], 0),
        tps=L.num(q["tps"]), tps_first=L.num(q["tps_first"])))
