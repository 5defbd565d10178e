"""The card budget: share per model, headroom, and free memory before a load.

Free memory before a load is read from the card at that moment: a release
call having returned proves nothing about what the
card holds. Without a driver the check says "not measured"; it never infers.
Where there is no card to read, the models share the host's memory: the pin is
then guarded by the host's available memory (MemAvailable) against the model's
measured process peak, by the same rule.
"""

from __future__ import annotations

from ..store import Store, utcnow
from .attribution import _window_sql
from .readings import NOT_MEASURED, SourceUnavailable


def free_before_load(store: Store, source, *, run_id: int | None, model_id: int | None,
                     required_mib: float | None = None) -> dict:
    """Read free memory per device from the card now and store it.

    Returns ``available``, ``devices`` (index, total, free), ``free_mib``
    (sum), ``required_mib`` and ``enough`` (None when not measured or nothing
    was required). ``required_mib`` is compared with the sum over devices;
    the caller that splits a model may compare per device itself.
    """
    try:
        reading = source.read()
    except SourceUnavailable as exc:
        store.insert("memory_free_checks", {"run_id": run_id, "model_id": model_id, "ts": utcnow(),
                                            "required_mib": required_mib, "source": source.kind,
                                            "note": f"{NOT_MEASURED}: {exc}"})
        return {"available": False, "reason": str(exc), "devices": [], "free_mib": None,
                "required_mib": required_mib, "enough": None}
    rows = [
        {"run_id": run_id, "model_id": model_id, "ts": reading.ts, "device_index": d.index,
         "total_mib": d.total_mib, "free_mib": d.free_mib, "required_mib": required_mib,
         "source": reading.source}
        for d in reading.devices
    ]
    with store.db.conn:
        store.db["memory_free_checks"].insert_all(rows)
    free = round(sum(d.free_mib for d in reading.devices), 3)
    return {
        "available": True, "ts": reading.ts,
        "devices": [{"index": d.index, "total_mib": d.total_mib, "free_mib": d.free_mib} for d in reading.devices],
        "free_mib": free, "required_mib": required_mib,
        "enough": (free >= required_mib) if required_mib is not None else None,
    }


def free_check_for_load(db, load_id: int) -> dict | None:
    """The last free-memory check of the load's model before the load was requested."""
    load = db.execute("select run_id, model_id, requested_at from loads where id = ?", [load_id]).fetchone()
    if load is None:
        return None
    run_id, model_id, requested = load
    row = db.execute(
        """select max(ts) from memory_free_checks where run_id = ? and model_id = ?
           and (? is null or ts <= ?)""",
        [run_id, model_id, requested, requested],
    ).fetchone()
    if not row or row[0] is None:
        return None
    rows = list(db.query(
        "select * from memory_free_checks where run_id = ? and model_id = ? and ts = ? order by device_index",
        [run_id, model_id, row[0]],
    ))
    if rows[0]["note"]:
        return {"available": False, "ts": row[0], "note": rows[0]["note"], "free_mib": None, "devices": []}
    return {
        "available": True, "ts": row[0], "note": None,
        "free_mib": round(sum(r["free_mib"] for r in rows), 3),
        "total_mib": round(sum(r["total_mib"] for r in rows), 3),
        "required_mib": rows[0]["required_mib"],
        "devices": [{"index": r["device_index"], "free_mib": r["free_mib"], "total_mib": r["total_mib"]} for r in rows],
    }


def card_totals(db, run_id: int, ts_from=None, ts_to=None) -> dict[int, float]:
    """Total MiB per device as the card reported it during the window."""
    window, args = _window_sql(ts_from, ts_to)
    sql = "select device_index, max(total_mib) from memory_samples where run_id = ? and scope = 'device' " \
          f"and total_mib is not null{window} group by device_index"
    return {r[0]: r[1] for r in db.execute(sql, [run_id, *args])}


def min_free(db, run_id: int, ts_from=None, ts_to=None) -> float | None:
    """The least free memory (summed over devices) seen in the window: neighbours included."""
    window, args = _window_sql(ts_from, ts_to)
    sql = "select ts, sum(free_mib) from memory_samples where run_id = ? and scope = 'device' " \
          f"and free_mib is not null{window} group by ts"
    vals = [r[1] for r in db.execute(sql, [run_id, *args])]
    return min(vals) if vals else None


def budget(db, run_id: int, card_mib: float | None, ts_from=None, ts_to=None) -> dict | None:
    """Share of all card memory one model uses, and what would be left beside it alone.

    ``headroom_mib`` counts only this model; ``min_free_mib`` is what the card
    really had free during the load, neighbours included. The two differ on
    purpose and are shown side by side.
    """
    totals = card_totals(db, run_id, ts_from, ts_to) or card_totals(db, run_id)
    if card_mib is None or not totals:
        return None
    total = sum(totals.values())
    return {
        "total_mib": round(total, 3),
        "devices": len(totals),
        "share": card_mib / total if total else None,
        "headroom_mib": round(total - card_mib, 3),
        "min_free_mib": min_free(db, run_id, ts_from, ts_to),
    }


def required_for_model(db, model_id: int) -> tuple[float | None, str | None]:
    """What loading the model needs on the cards, and on what that figure rests.

    The model's peak on the card in an earlier measured load (same model
    row, so the same name and file digest) when there is one; otherwise the
    size of its weights file, which is a lower bound (KV cache and compute
    buffers come on top). ``(None, None)`` when neither is known.
    """
    row = db.execute(
        """select max(s.peak_mib) from memory_load_stats s join loads l on l.id = s.load_id
           where l.model_id = ? and s.status = 'steady' and s.peak_mib is not null""", [model_id]).fetchone()
    if row and row[0]:
        return round(row[0], 3), "its peak on the card in an earlier load"
    row = db.execute("select file_bytes from models where id = ?", [model_id]).fetchone()
    if row and row[0]:
        return round(row[0] / 2**20, 3), "the size of its weights file, a lower bound"
    return None, None


def required_in_host(db, model_id: int) -> tuple[float | None, str | None]:
    """What loading the model needs in host memory (a model on the CPU or in unified memory), and on what
    that rests: its server process's peak resident memory in an earlier load of the same model row, else
    its weights file's size, a lower bound (the KV cache and compute buffers come on top)."""
    try:
        row = db.execute("""select max(c.peak_rss_mib) from host_memory_cells c join loads l on l.id = c.load_id
                            where l.model_id = ? and c.status = 'ok'""", [model_id]).fetchone()
    except Exception as exc:  # noqa: BLE001 -- a store from before the table: the file size alone
        if "no such table" not in str(exc):
            raise
        row = None
    if row and row[0]:
        return round(row[0], 3), "its server process's peak in an earlier load"
    row = db.execute("select file_bytes from models where id = ?", [model_id]).fetchone()
    if row and row[0]:
        return round(row[0] / 2**20, 3), "the size of its weights file, a lower bound"
    return None, None


def host_before_load(store: Store, *, run_id: int | None, model_id: int | None,
                     required_mib: float | None = None, basis: str | None = None) -> dict:
    """The host's available memory now (Linux: MemAvailable), stored beside what the load needs."""
    from .host import SOURCE, host_available

    now = host_available()
    store.insert("host_memory_checks", {"run_id": run_id, "model_id": model_id, "ts": utcnow(),
                                        "available_mib": now["available_mib"], "total_mib": now["total_mib"],
                                        "required_mib": required_mib, "basis": basis, "source": SOURCE})
    enough = now["available_mib"] >= required_mib if required_mib is not None else None
    return {**now, "required_mib": required_mib, "enough": enough}


def pin_guard(store: Store, capture, model_id: int, model: str, pinned: str) -> str | None:
    """Before loading ``model`` beside the pinned model: the refusal reason, or None to go ahead.

    Free memory is read from the card (principle 12) and compared with what
    the model needs (:func:`required_for_model`). Not enough means the load
    would push the production model out or fail: it is refused, with both
    figures in the reason. Without a card reading, or without a known need,
    the load goes ahead and the stored check says what was not verified.
    """
    need, basis = required_for_model(store.db, model_id)
    check = capture.before_load(model_id, required_mib=need)
    if not check["available"]:
        return _host_guard(store, capture.run_id, model_id, model, pinned)
    if check["enough"] is not False:
        return None
    devices = ", ".join(f"GPU{d['index']} {_size(d['free_mib'])}" for d in check["devices"])
    return (f"{_size(check['free_mib'])} free on the cards ({devices}) < {_size(need)} needed ({basis}); "
            f"loading {model} could push the pinned model {pinned} out")


def _size(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.1f} MiB"


def _host_guard(store: Store, run_id: int, model_id: int, model: str, pinned: str) -> str | None:
    """No card to read: the models share the host's memory, so the pin is guarded there, by the same rule."""
    need, basis = required_in_host(store.db, model_id)
    check = host_before_load(store, run_id=run_id, model_id=model_id, required_mib=need, basis=basis)
    if check["enough"] is not False:
        return None
    return (f"{_size(check['available_mib'])} available in host memory < {_size(need)} needed ({basis}); "
            f"loading {model} could push the pinned model {pinned} out")
