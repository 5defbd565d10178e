"""Where each run's rates came from: server counters, the wall clock, or an in-process tool.

``counter_provenance(db, run_id)`` lists the ``counter_source`` values of a
run's measured samples with an English label (German in
the catalogue), so an article can say, per run, whether its
tok/s are counters or wall-clock-derived (weaker evidence, principle 1).
"""

from __future__ import annotations

from cardproof.marks import N_

LABELS = {
    "timings": N_("server counters (llama.cpp timings)"),
    "ollama_counters": N_("server counters (Ollama eval_count / eval_duration)"),
    "wall_clock_stream": N_("wall clock between streamed tokens (weaker evidence than counters)"),
    "llama-bench": N_("in-process measurement (llama-bench)"),
    "none": N_("no rate (the request failed)"),
}
#: sources whose rates are not a server's own counters
WEAKER = frozenset({"wall_clock_stream"})


def counter_provenance(db, run_id: int) -> list[dict]:
    """``[{"source", "label", "samples", "weaker"}]`` for the run's measurement samples."""
    rows = db.execute(
        "select coalesce(counter_source, 'none'), count(*) from samples "
        "where run_id = ? and coalesce(kind, 'measure') = 'measure' group by 1 order by 2 desc", [run_id]).fetchall()
    return [{"source": s, "label": LABELS.get(s, s), "samples": n, "weaker": s in WEAKER} for s, n in rows]
