"""Joules from two readings of a counter, and per token from a cell's own samples.

A cell's energy is, per source, the sum over its domains of the counter at the cell's end less the
counter at its start (a RAPL counter that wrapped between them gets its range added back). Its mean
draw is that over the time between the two readings. Per token, the draw is split by the server's
own timings: joules per generated token = mean draw × the samples' decode time / the tokens they
generated; per prompt token = mean draw × their prefill time / the prompt tokens they processed
(cached ones are not processed). The cell's mean draw includes the gaps between its requests, so the
split is a lower bound of the active phases' draw; the idle draw before the run is shown beside it.
"""

from __future__ import annotations

from collections import defaultdict


def delta(start: float | None, end: float | None, wrap: float | None) -> float | None:
    """Joules between two counter values; a counter that wrapped once gets its range back; None otherwise."""
    if start is None or end is None:
        return None
    d = end - start
    if d < 0 and wrap:
        d += wrap
    return d if d >= 0 else None


def _window(rows: list[dict], first: str, last: str) -> dict[str, dict]:
    """Per source: joules and seconds between the ``first`` and ``last`` readings (every domain needed)."""
    by: dict[tuple, dict] = defaultdict(dict)
    for r in rows:
        if r["joules"] is not None:
            by[(r["source"], r["domain"])][r["phase"]] = r
    out: dict[str, dict] = {}
    broken: set[str] = {r["source"] for r in rows if r["joules"] is None and r["phase"] in (first, last)}
    for (source, _domain), phases in sorted(by.items()):
        a, b = phases.get(first), phases.get(last)
        d = delta(a and a["joules"], b and b["joules"], (a or b or {}).get("wrap_joules"))
        if d is None:
            broken.add(source)
            continue
        entry = out.setdefault(source, {"joules": 0.0, "seconds": b["mono_s"] - a["mono_s"], "domains": []})
        entry["joules"] += d
        entry["domains"].append(_domain)
    for source in broken:
        out.pop(source, None)  # one domain missing: a sum over the rest would be too small, so none is given
    for entry in out.values():
        entry["watts"] = entry["joules"] / entry["seconds"] if entry["seconds"] > 0 else None
    return out


def _rows(db, sql: str, args: list) -> list[dict]:
    cur = db.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def idle_draw(db, run_id: int) -> dict[str, dict]:
    """Per source: the mean draw over the idle wait before the run's first cell."""
    return _window(_rows(db, "select * from energy_readings where run_id = ? and phase in "
                             "('idle_start', 'idle_end')", [run_id]), "idle_start", "idle_end")


def unavailable(db, run_id: int) -> dict[str, str]:
    """Per source that could not be read: the reason stored when the run began."""
    return {r["source"]: r["reason"] for r in _rows(
        db, "select source, reason from energy_readings where run_id = ? and phase = 'unavailable' order by id",
        [run_id])}


def cell_energy(db, cell_id: int) -> dict[str, dict]:
    """Per source: the cell's joules, seconds, mean draw and joules per generated and per prompt token."""
    out = _window(_rows(db, "select * from energy_readings where cell_id = ? and phase in "
                            "('cell_start', 'cell_end')", [cell_id]), "cell_start", "cell_end")
    if not out:
        return out
    s = db.execute(
        """select sum(generated_tokens), sum(predicted_ms), sum(prompt_tokens - coalesce(cached_tokens, 0)),
                  sum(prompt_ms) from samples where cell_id = ? and error_kind is null
           and generated_tokens is not null and predicted_ms is not null and prompt_ms is not null""",
        [cell_id]).fetchone()
    generated, decode_ms, prompt, prefill_ms = s
    for entry in out.values():
        w = entry["watts"]
        entry["generated_tokens"], entry["prompt_tokens"] = generated, prompt
        entry["j_per_generated_token"] = (w * decode_ms / 1000 / generated) if w is not None and generated else None
        entry["j_per_prompt_token"] = (w * prefill_ms / 1000 / prompt) if w is not None and prompt else None
    return out
