"""The server's counters claim more time than our own clock saw for the request."""

from __future__ import annotations

from .base import Contradiction, Side

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
            {"en": "Server counters longer than the request itself",
             "de": "Serverzähler länger als die Anfrage selbst"},
            Side({"en": f"The server's timings add up to {worst[1]:.1f} ms for sample {worst[0]['id']} "
                        f"({len(bad)} samples in all).",
                  "de": f"Die Zeiten des Servers ergeben {worst[1]:.1f} ms für Messung {worst[0]['id']} "
                        f"({len(bad)} Messungen insgesamt)."}, ev),
            Side({"en": f"Our clock saw the whole request take {worst[0]['wall_ms']:.1f} ms.",
                  "de": f"Unsere Uhr sah die ganze Anfrage in {worst[0]['wall_ms']:.1f} ms."}, ev),
        )
    ]
