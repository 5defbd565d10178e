"""The server's counters claim more time than our own clock saw for the request."""

from __future__ import annotations

from cardproof.marks import N_, NP_

from .base import Contradiction, Detector, Side, said

# Clock granularity and stream buffering: a few ms either way are not a contradiction.
_SLACK_MS = 5.0


def detect(db, view: dict) -> list[Contradiction]:
    bad = []
    for s in view["samples"]:
        if s["error_kind"] or s["wall_ms"] is None or s["prompt_ms"] is None or s["predicted_ms"] is None:
            continue
        counted = s["prompt_ms"] + s["predicted_ms"]
        if counted > s["wall_ms"] + _SLACK_MS:
            bad.append((s, counted))
    if not bad:
        return []
    ev = tuple(f"sample-{s['id']}" for s, _ in bad[:10])
    worst = max(bad, key=lambda x: x[1] - x[0]["wall_ms"])
    return [
        Contradiction(
            "counters_vs_clock",
            said(N_("Server counters longer than the request itself")),
            Side(said(NP_("The server's timings add up to {ms} ms for sample {sample} ({n} sample in all).",
                          "The server's timings add up to {ms} ms for sample {sample} ({n} samples in all)."),
                      {"ms": float(worst[1]), "sample": str(worst[0]["id"]), "n": len(bad)}, len(bad)), ev),
            Side(said(N_("Our clock saw the whole request take {ms} ms."), {"ms": float(worst[0]["wall_ms"])}), ev),
        )
    ]


DETECTOR = Detector("counters_vs_clock", detect)
