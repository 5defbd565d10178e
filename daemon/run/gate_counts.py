"""Gate counts as the article states them: over measured samples, canaries apart.

The runner's and the demo's end-of-run line and the article's gate table
(report/gates.py) count the same rows: gate results of samples of kind
``measure``. A canary is a deliberate provocation; its firing is the proof
that the gate works, not a finding about the models, so it is counted apart.
"""

from __future__ import annotations


def gate_counts(db, run_id: int) -> dict:
    """``measured``: gate -> (fired, judged) over measured samples; ``canaries``: gate -> result."""
    conn = db.conn if hasattr(db, "conn") else db
    measured = {
        gate: (int(fired or 0), int(judged))
        for gate, fired, judged in conn.execute(
            "select gate, sum(fired = 1), count(*) from gate_results join samples on samples.id = sample_id "
            "where samples.run_id = ? and coalesce(samples.kind, 'measure') = 'measure' group by gate "
            "order by gate", [run_id])
    }
    canaries = {gate: result or "pending" for gate, result in conn.execute(
        "select gate, result from canaries where run_id = ? order by gate", [run_id])}
    return {"measured": measured, "canaries": canaries}


def summary_line(db, run_id: int) -> str:
    """One console line: which gates fired on how many measured samples, then the canaries' results."""
    counts = gate_counts(db, run_id)
    judged = max((j for _f, j in counts["measured"].values()), default=0)
    fired = [f"{g} fired on {f}/{j}" for g, (f, j) in counts["measured"].items() if f]
    line = f"gates over {judged} measured samples: " + (", ".join(fired) or "none fired")
    if counts["canaries"]:
        by_result: dict[str, list[str]] = {}
        for gate, result in counts["canaries"].items():
            by_result.setdefault(result, []).append(gate)
        line += "; canaries apart: " + "; ".join(f"{r} {len(g)} ({', '.join(g)})" for r, g in sorted(by_result.items()))
    return line
