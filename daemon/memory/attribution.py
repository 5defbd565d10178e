"""Whose memory is it: a load's server processes, found by port or PID.

The memory of a load is the memory the card reports for its own server
processes (the router child listening on the load's port, the Ollama runner),
summed over devices per tick. Every other process on the same cards is a
neighbour: listed, never counted into the model. PIDs the driver reports from
another PID namespace are never matched by number.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict

from cardproof.marks import N_
from ..store import Store, dumps, utcnow
from .procinfo import server_pids
from .readings import NOT_MEASURED, SourceUnavailable
from .sampler import write_reading

_OURS = ("local", "local_unverified")


def resolve_load_pids(store: Store, load_id: int, *, pid: int | None = None, port: int | None = None,
                      arg: str | None = None, include_children: bool = False) -> list[int]:
    """Find the load's server processes now and record them (memory_load_pids)."""
    pids, how = server_pids(pid=pid, port=port, arg=arg, include_children=include_children)
    now = utcnow()
    for p in pids:
        try:
            name = open(f"/proc/{p}/comm").read().strip()
        except OSError:
            name = None
        store.insert("memory_load_pids", {"load_id": load_id, "pid": p, "how": how, "process_name": name,
                                          "resolved_at": now})
    return pids


def load_pids(db, load_id: int) -> list[int]:
    """The PIDs recorded for a load; the load's own ``pid`` column if none were resolved."""
    pids = [r[0] for r in db.execute("select distinct pid from memory_load_pids where load_id = ?", [load_id])]
    if not pids:
        row = db.execute("select pid from loads where id = ?", [load_id]).fetchone()
        if row and row[0]:
            pids = [row[0]]
    return sorted(pids)


def load_window(db, load_id: int) -> tuple[str | None, str | None, int | None]:
    """``(from, to, run_id)`` of a load: requested until ended (open while it runs)."""
    row = db.execute("select requested_at, ready_at, ended_at, run_id from loads where id = ?", [load_id]).fetchone()
    if row is None:
        raise KeyError(f"no load {load_id}")
    return row[0] or row[1], row[2], row[3]


def _window_sql(ts_from, ts_to) -> tuple[str, list]:
    sql, args = "", []
    if ts_from:
        sql += " and ts >= ?"
        args.append(ts_from)
    if ts_to:
        sql += " and ts <= ?"
        args.append(ts_to)
    return sql, args


def tick_series(db, run_id: int, pids, ts_from=None, ts_to=None) -> list[dict]:
    """Per tick: total MiB of ``pids`` on all devices, and per device."""
    pids = list(pids)
    if not pids:
        return []
    wsql, wargs = _window_sql(ts_from, ts_to)
    marks = ",".join("?" * len(pids))
    rows = db.execute(
        f"""select ts, device_index, sum(used_mib), count(*) - count(used_mib) from memory_samples
            where run_id = ? and scope = 'process' and pid in ({marks})
              and coalesce(pid_status, 'local_unverified') in ('local', 'local_unverified') {wsql}
            group by ts, device_index order by ts""",
        [run_id, *pids, *wargs],
    ).fetchall()
    ticks: dict[str, dict] = {}
    for ts, dev, used, missing in rows:
        t = ticks.setdefault(ts, {"ts": ts, "total_mib": 0.0, "per_device": {}, "withheld": False})
        t["per_device"][dev] = used
        t["total_mib"] += used or 0.0
        t["withheld"] |= bool(missing)
    return list(ticks.values())


def neighbours(db, run_id: int, pids, ts_from=None, ts_to=None) -> list[dict]:
    """Every other process seen on the cards in the window, with its peak and median."""
    wsql, wargs = _window_sql(ts_from, ts_to)
    mine = set(pids)
    per: dict[int, dict] = {}
    rows = db.execute(
        f"""select pid, ts, sum(used_mib), max(process_name), max(pid_status), group_concat(distinct device_index)
            from memory_samples where run_id = ? and scope = 'process' {wsql}
            group by pid, ts order by pid, ts""",
        [run_id, *wargs],
    ).fetchall()
    for pid, _ts, used, name, status, devs in rows:
        if pid in mine and status in _OURS:
            continue
        n = per.setdefault(pid, {"pid": pid, "name": name, "pid_status": status, "values": [], "devices": set()})
        if used is not None:
            n["values"].append(used)
        n["devices"].update(int(d) for d in str(devs).split(",") if d not in ("", "None"))
    out = []
    for n in per.values():
        vals = n.pop("values")
        n["devices"] = sorted(n["devices"])
        n["peak_mib"] = max(vals) if vals else None
        n["median_mib"] = statistics.median(vals) if vals else None
        out.append(n)
    return sorted(out, key=lambda n: -(n["peak_mib"] or 0))


def not_measured_reason(db, run_id: int) -> str | None:
    """The reason stored when the run had no card to read, else None."""
    row = db.execute(
        "select reason from memory_samples where run_id = ? and note = ? limit 1", [run_id, NOT_MEASURED]
    ).fetchone()
    return (row[0] or "no NVIDIA driver") if row else None


def status_without_ticks(db, run_id: int, pids, ts_from=None, ts_to=None) -> tuple[str, str]:
    """Why a load has no memory from the card, said precisely rather than guessed."""
    reason = not_measured_reason(db, run_id)
    if reason:
        return "not_measured", f"{NOT_MEASURED}: {reason}"
    if not pids:
        return "no_pid", "the load's server process was not identified (no port, no PID)"
    wsql, wargs = _window_sql(ts_from, ts_to)
    foreign = db.execute(
        f"""select count(*) from memory_samples where run_id = ? and scope = 'process'
            and pid_status in ('foreign', 'mismatch') {wsql}""",
        [run_id, *wargs],
    ).fetchone()[0]
    if foreign:
        return ("pid_namespace_mismatch",
                "the driver reports PIDs from another PID namespace (e.g. a container without --pid=host); "
                "the load's process cannot be matched and is not guessed")
    return "no_process_on_card", f"no memory on the card for PID(s) {', '.join(map(str, pids))}"


def _stats_row(run_id, load_id, kind, ticks, pids, db, ts_from, ts_to, *, cell_id=None, status=None, note=None):
    totals = [t["total_mib"] for t in ticks if not t["withheld"]]
    per_device: dict = defaultdict(list)
    for t in ticks:
        for dev, used in t["per_device"].items():
            if used is not None:
                per_device[dev].append(used)
    if not ticks and status != "not_measured":
        status, note = status_without_ticks(db, run_id, pids, ts_from, ts_to)
    elif ticks and not totals:
        status, note = "withheld", "the driver does not report per-process memory for these processes"
    return {
        "run_id": run_id, "load_id": load_id, "cell_id": cell_id, "kind": kind,
        "ts_from": ts_from, "ts_to": ts_to, "status": status or "ok",
        "total_mib": totals[-1] if totals else None,
        "peak_mib": max(totals) if totals else None,
        "median_mib": statistics.median(totals) if totals else None,
        "n_ticks": len(ticks),
        "per_device_json": dumps({str(d): statistics.median(v) for d, v in per_device.items()}),
        "neighbours_json": dumps(neighbours(db, run_id, pids, ts_from, ts_to)),
        "note": note,
    }


def settle_after_load(store: Store, source, run_id: int, load_id: int, pids, *, poll_s: float = 0.5,
                      timeout_s: float = 15.0, tolerance_mib: float = 1.0, stable_reads: int = 3) -> dict:
    """Read the card until the load's memory stops moving; store that steady state.

    Buffers are allocated after "ready" on some servers (CUDA graphs, first
    batch), so one read right after the load can be low. Stable means
    ``stable_reads`` consecutive reads within ``tolerance_mib`` of each other.
    """
    pids = list(pids)
    ts_from = utcnow()
    ticks, status = [], "not_steady"
    deadline = time.monotonic() + timeout_s
    try:
        while pids:  # no process identified: nothing to wait for, the row says why
            reading = source.read()
            write_reading(store, reading, run_id, {p: load_id for p in pids}, note="after_load")
            used = reading.used_by(pids)
            ticks.append({"ts": reading.ts, "total_mib": used or 0.0, "withheld": used is None,
                          "per_device": {p.device_index: p.used_mib for p in reading.processes_of(pids)}})
            last = [t["total_mib"] for t in ticks[-stable_reads:]]
            if len(last) == stable_reads and max(last) - min(last) <= tolerance_mib:
                status = "steady"
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
    except SourceUnavailable as exc:
        status = "not_measured"
        ticks = []
        note = f"{NOT_MEASURED}: {exc}"
    else:
        note = None if status == "steady" else f"still moving after {timeout_s:g} s"
    ticks = [t for t in ticks if t["per_device"]]  # reads where our processes were on the card
    row = _stats_row(run_id, load_id, "after_load", ticks[-stable_reads:], pids, store.db, ts_from, utcnow(),
                     status=status, note=note)
    row["id"] = store.insert("memory_load_stats", row)
    return row


def cell_stats(store: Store, run_id: int, cell_id: int, load_id: int | None) -> dict:
    """Peak and median of the load's memory while the cell's samples ran; stored."""
    ts_from = store.db.execute("select min(started_at) from samples where cell_id = ?", [cell_id]).fetchone()[0]
    ts_to = utcnow()
    pids = load_pids(store.db, load_id) if load_id else []
    ticks = tick_series(store.db, run_id, pids, ts_from, ts_to)
    row = _stats_row(run_id, load_id, "cell", ticks, pids, store.db, ts_from, ts_to, cell_id=cell_id)
    row["id"] = store.insert("memory_load_stats", row)
    return row


def load_memory(db, load_id: int) -> dict:
    """The card's figure for one load: steady state after load if taken, else the median tick."""
    ts_from, ts_to, run_id = load_window(db, load_id)
    pids = load_pids(db, load_id)
    steady = db.execute(
        "select * from memory_load_stats where load_id = ? and kind = 'after_load' order by id desc limit 1",
        [load_id],
    ).fetchone()
    ticks = tick_series(db, run_id, pids, ts_from, ts_to)
    totals = [t["total_mib"] for t in ticks if not t["withheld"]]
    out = {"load_id": load_id, "pids": pids, "peak_mib": max(totals) if totals else None,
           "median_mib": statistics.median(totals) if totals else None, "n_ticks": len(ticks),
           "neighbours": neighbours(db, run_id, pids, ts_from, ts_to)}
    if steady is not None:
        cols = [d[0] for d in db.execute("select * from memory_load_stats limit 0").description]
        s = dict(zip(cols, steady))
        if s["total_mib"] is not None:
            out.update(card_mib=s["median_mib"], basis=N_("steady state after load"), status=s["status"],
                       per_device={int(k): v for k, v in json.loads(s["per_device_json"] or "{}").items()},
                       note=s["note"])
            return out
    if totals:
        per_device: dict = defaultdict(list)
        for t in ticks:
            for d, v in t["per_device"].items():
                if v is not None:
                    per_device[d].append(v)
        out.update(card_mib=statistics.median(totals), basis=N_("median over the load"), status="ok",
                   per_device={d: statistics.median(v) for d, v in per_device.items()}, note=None)
        return out
    if ticks:  # the processes are there, the driver withholds their memory (WDDM, MIG without rights)
        status, note = "withheld", "the driver does not report per-process memory for these processes"
    else:
        status, note = status_without_ticks(db, run_id, pids, ts_from, ts_to)
    out.update(card_mib=None, basis=None, status=status, per_device={}, note=note)
    return out
