"""A load's context where its log has no ``llama_context: n_ctx`` line: stated from its slots.

At the default verbosity many builds print no ``llama_context`` lines, but
every slot still says ``new slot, n_ctx = N``. That is the whole context
only where the slots share one cache: with one slot, or with ``kv_unified =
true`` in the log; with ``kv_unified = false`` each slot has its own part of
the cache, N times the slots in all. Where the log does not say which, or a
slot was capped to the model's training context (``seq_ctx_size`` differs
from N), the context stays unstated: a guess would be worse than a gap.

The stated ``ctx_size`` is an ordinary fact on the line of the last slot, so
a reader follows it to the lines it comes from.
"""

from __future__ import annotations

_NAMES = ("ctx_size", "slots", "slot_ctx_size", "kv_unified", "seq_ctx_size")


def context_from_slots(facts: list[tuple]) -> tuple[float, int] | None:
    """``(ctx_size, line_id)`` from one load's ``(name, value_num, value_text, line_id)`` rows in line order,
    or None where the log states the context itself or does not prove it."""
    by: dict[str, list[tuple]] = {}
    for name, num, text, line_id in facts:
        by.setdefault(name, []).append((num, text, line_id))
    if by.get("ctx_size") or not by.get("slots") or not by.get("slot_ctx_size"):
        return None
    slots_num, _, slots_line = by["slots"][-1]
    sizes = by["slot_ctx_size"]
    if not slots_num or slots_num < 1 or any(num is None for num, _, _ in sizes):
        return None
    per_slot = {num for num, _, _ in sizes}
    # every slot has said it: one line per slot, or one line for all (2026: "n_slots = 4, n_ctx_slot = N")
    said_by_all = len(sizes) == slots_num or (len(sizes) == 1 and sizes[0][2] == slots_line)
    if len(per_slot) != 1 or not said_by_all:
        return None
    n = per_slot.pop()
    if any(num != n for num, _, _ in by.get("seq_ctx_size", [])):
        return None  # capped to the training context, or slots the sequence does not explain
    unified = (by.get("kv_unified") or [(None, None, None)])[-1][1]
    if slots_num == 1 or unified == "true":
        total = n
    elif unified == "false":
        total = n * slots_num
    else:
        return None
    return float(total), sizes[-1][2]


def state_context(conn, load_ids) -> int:
    """Store the context each of ``load_ids`` states through its slots (see the module); returns the facts added."""
    added = 0
    marks = ", ".join("?" * len(_NAMES))
    for load in sorted(set(load_ids)):
        rows = conn.execute(f"select name, value_num, value_text, line_id from facts where load_id = ? "
                            f"and name in ({marks}) order by line_id, id", [load, *_NAMES]).fetchall()
        got = context_from_slots(rows)
        if got is None:
            continue
        conn.execute("insert into facts (load_id, line_id, name, value_num, unit) values (?, ?, 'ctx_size', ?, "
                     "'tokens')", [load, got[1], got[0]])
        added += 1
    return added
