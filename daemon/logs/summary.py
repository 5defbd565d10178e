"""Loads with their facts and line counts: what ``cardproof loads`` and the report show.

Read-only. Where a load printed a fact more than once (a fitting pass, then
the real allocation), the last line wins; draft acceptance is summed over
all of the load's requests; CUDA errors are listed; of crash signals the
first counts (``Aborted`` after a failed assert is the same death). ``observed`` is what the
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
        if name == "crash_signal":  # the first is how the process died; later ones are its aftermath
            if name not in values:
                values[name], lines[name] = text, line_id
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


def crashed_loads(db, run_id: int) -> list[dict]:
    """The loads of a run whose server process died, each with the line that says so (or None).

    A run's loads are its own rows and the log's loads that own lines captured during it: a
    single-model server started before the run has a load that began before the run, and its
    crash during the run is still this run's. ``line_id``/``line``: the first line stating the
    signal, else the line the load ended at (a router's ``exited with status``).
    """
    conn = db.conn if hasattr(db, "conn") else db
    rows = conn.execute(
        "select l.id, coalesce(m.name, l.model_name), l.end_reason, coalesce("
        "(select f.line_id from facts f where f.load_id = l.id and f.name = 'crash_signal' order by f.line_id "
        "limit 1), l.end_line_id) from loads l left join models m on m.id = l.model_id "
        "where l.merged_into is null and l.end_reason like 'crashed: %' and (l.run_id = ? or l.id in "
        "(select load_id from log_lines where run_id = ? and load_id is not null)) order by l.id",
        [run_id, run_id]).fetchall()
    out = []
    for load_id, model, reason, line_id in rows:
        raw = conn.execute("select raw from log_lines where id = ?", [line_id]).fetchone() if line_id else None
        out.append({"id": load_id, "model": model, "end_reason": reason, "line_id": line_id if raw else None,
                    "line": raw[0] if raw else None})
    return out

