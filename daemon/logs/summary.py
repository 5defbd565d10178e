"""Loads with their facts and line counts: what ``cardproof loads`` and the report show.

Read-only. Where a load printed a fact more than once (a fitting pass, then
the real allocation), the last line wins; draft acceptance is summed over
all of the load's requests; CUDA errors are listed. ``observed`` is what the
server's own per-request counters say (observed.py): kept apart from
cardproof's measured samples, never mixed into them.
"""

from __future__ import annotations

from .observed import observed_rows, observed_summary

_LOAD_SQL = """
select l.id, coalesce(m.name, l.model_name) as model, l.origin, l.trigger, l.run_id, l.requested_at,
       l.ready_at, l.ended_at, l.end_reason, l.pid, l.port, l.status, l.load_seconds, l.exit_status,
       l.model_file, l.start_line_id, l.ready_line_id, l.end_line_id
from loads l left join models m on m.id = l.model_id
where l.merged_into is null {where}
order by l.id
"""


def load_summaries(db, run_id: int | None = None, load_ids: list[int] | None = None) -> list[dict]:
    """One dict per load: ``model``, ``started_at``, ``pid``, ``port``, ``facts``, ``fact_lines``, ``lines``,
    ``open``, ``end_reason`` and ``observed`` (the server's own request counters, see observed.py).

    ``facts`` maps a fact name to its value, or for per-device facts to
    ``{device: value}``; ``fact_lines`` has the same shape with the id of
    the line each value comes from.
    """
    conn = db.conn if hasattr(db, "conn") else db
    where, params = "", []
    if run_id is not None:
        where += " and l.run_id = ?"
        params.append(run_id)
    if load_ids is not None:
        where += f" and l.id in ({', '.join('?' * len(load_ids))})"
        params += list(load_ids)
    cur = conn.execute(_LOAD_SQL.format(where=where), params)
    names = [d[0] for d in cur.description]
    loads = [dict(zip(names, r)) for r in cur.fetchall()]
    if not loads:
        return []
    ids = [ld["id"] for ld in loads]
    marks = ", ".join("?" * len(ids))
    counts = dict(conn.execute(
        f"select load_id, count(*) from log_lines where load_id in ({marks}) group by load_id", ids).fetchall())
    facts: dict[int, list] = {}
    for row in conn.execute(
            f"select load_id, line_id, name, device, value_num, value_text, unit from facts "
            f"where load_id in ({marks}) order by line_id, id", ids):
        facts.setdefault(row[0], []).append(row[1:])
    observed = observed_rows(conn, ids)
    out = []
    for ld in loads:
        values, lines = summarise(facts.get(ld["id"], []))
        ld.update(started_at=ld["requested_at"], facts=values, fact_lines=lines, lines=counts.get(ld["id"], 0))
        ld["origin"] = ld["origin"] or "runner"
        # a server still running when its log ends: no exit, no next start (log loads only)
        ld["open"] = ld["origin"] == "log" and ld["end_reason"] is None
        ld["observed"] = observed_summary(observed.get(ld["id"], []))
        out.append(ld)
    return out


def summarise(rows) -> tuple[dict, dict]:
    """``(values, line_ids)`` from ``(line_id, name, device, value_num, value_text, unit)`` rows in line order."""
    values: dict = {}
    lines: dict = {}
    for line_id, name, device, num, text, _unit in rows:
        if name == "draft_acceptance":
            acc = values.setdefault(name, {"accepted": 0, "generated": 0, "rate": None, "requests": 0})
            try:
                a, g = (int(x) for x in (text or "").split("/"))
            except ValueError:
                continue
            acc["accepted"] += a
            acc["generated"] += g
            acc["requests"] += 1
            acc["rate"] = round(acc["accepted"] / acc["generated"], 5) if acc["generated"] else None
            lines.setdefault(name, [])
            lines[name].append(line_id)
            continue
        value = num if num is not None else text
        if num is not None and float(num).is_integer() and name.endswith(("_layers", "ctx_size", "n_max", "slots")):
            value = int(num)
        if name == "cuda_error":
            values.setdefault(name, [])
            lines.setdefault(name, [])
            if value not in values[name]:
                values[name].append(value)
                lines[name].append(line_id)
            continue
        if device is not None:
            values.setdefault(name, {})[device] = value
            lines.setdefault(name, {})[device] = line_id
        else:
            values[name] = value
            lines[name] = line_id
    return values, lines
