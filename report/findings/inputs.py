"""What the finding rules read beyond the run view, read once per run.

The rules themselves see only a dict (as caveat rules do), so they can be
tested on generated views and the article and ``cardproof publish`` state the
same findings from the same inputs. The article hands in what its other
sections already built (``fit``, ``memory``, ``evidence``); publishing reads
them here.
"""

from __future__ import annotations

import sqlite3
import tomllib

#: the models columns a finding groups by (m023, daemon/server/modelfile.py gguf_header) beside the older ones
SHAPE = ("architecture", "quantisation", "file_bytes", "params", "active_params", "expert_count",
         "expert_used_count", "basename", "tokenizer_sha256")


def gather(db, view: dict) -> dict:
    """``shapes`` (model -> its GGUF shape), ``depth_steps``, ``fit``, ``memory``, ``crashes``, ``requantized``,
    ``quality``."""
    conn = db.conn if hasattr(db, "conn") else db
    rid = view["run"]["id"]
    out = {"shapes": _shapes(conn, view), "depth_steps": _depth_steps(conn, rid),
           "requantized": requantized(view["run"].get("campaign_text"))}
    if "fit" in view:
        out["fit"] = view["fit"]
    else:
        from ..fit import fit_view

        out["fit"] = fit_view(db, rid)
    if "memory" in view:
        out["memory"] = view["memory"]
    else:
        from ..memory import memory_view

        out["memory"] = memory_view(db, rid)
    if "evidence" in view:
        crashes = view["evidence"].get("crashes", [])
    else:
        from cardproof.daemon.campaign.evidence import crashed_loads

        crashes = crashed_loads(db, rid)
    out["crashes"] = _timed(conn, crashes)
    if "quality" in view:
        out["quality"] = view["quality"]
    else:
        from ..quality import quality_view

        out["quality"] = quality_view(db, rid, view | out)  # reads the memory gathered above
    return out


def _timed(conn, crashes: list[dict]) -> list[dict]:
    """Crashed loads with when each was asked for and ended: a failed request is matched to the one serving it."""
    if not crashes:
        return []
    ids = [c["id"] for c in crashes]
    when = {r[0]: r[1:] for r in conn.execute(
        f"select id, requested_at, ended_at from loads where id in ({', '.join('?' * len(ids))})", ids)}
    return [c | dict(zip(("requested_at", "ended_at"), when.get(c["id"], (None, None)))) for c in crashes]


def _shapes(conn, view: dict) -> dict[str, dict]:
    ids = sorted({c["model_id"] for c in view["cells"] if c.get("model_id") is not None})
    if not ids:
        return {}
    have = {r[1] for r in conn.execute("pragma table_info(models)")}
    cols = [c for c in SHAPE if c in have]  # a store read as it is (newer_migrations) may lack m023
    cur = conn.execute(f"select name, {', '.join(cols)} from models where id in ({', '.join('?' * len(ids))})", ids)
    return {row[0]: dict(zip(cols, row[1:])) for row in cur.fetchall()}


def _depth_steps(conn, run_id: int) -> list[dict]:
    """Per model, its depth steps in order: ``id``, ``depth``, ``tokens`` (the server's median prompt count),
    ``values`` (decode tok/s of the answered requests), ``refused``."""
    try:
        steps = conn.execute(
            "select st.id, st.cell_id, st.depth_tokens, st.refused_reason, m.name from load_steps st "
            "left join models m on m.id = st.model_id where st.run_id = ? and st.axis = 'depth' "
            "order by st.position, st.id", [run_id]).fetchall()
    except sqlite3.OperationalError:  # before m015: no steps
        return []
    by_model: dict[str, list[dict]] = {}
    loads: dict[str, set] = {}
    for sid, cell_id, depth, refused, model in steps:
        loads.setdefault(model or "?", set()).update(
            r[0] for r in conn.execute("select distinct load_id from samples where cell_id = ? and load_id is not null",
                                       [cell_id]))
        rows = conn.execute("select decode_tps, prompt_tokens from samples where cell_id = ? and error_kind is null "
                            "order by id", [cell_id]).fetchall()
        values = [float(r[0]) for r in rows if _number(r[0])]
        tokens = sorted(float(r[1]) for r in rows if _number(r[1]))
        by_model.setdefault(model or "?", []).append({
            "id": sid, "depth": depth, "refused": bool(refused), "values": values,
            "tokens": (tokens[(len(tokens) - 1) // 2] + tokens[len(tokens) // 2]) / 2 if tokens else None})
    return [{"model": m, "steps": s, "settings": _load_settings(conn, loads.get(m, set()))} for m, s in by_model.items()]


#: the settings that decide what context costs, by the fact a load's log states each in (daemon/logs/parsers/)
CONTEXT_SETTINGS = ("flash_attn", "kv_cache_type_k", "kv_cache_type_v", "slots")


def _load_settings(conn, load_ids: set) -> dict:
    """The context settings the log of the load(s) that served the depth steps states, where all agree."""
    if not load_ids:
        return {}
    marks = ", ".join("?" * len(load_ids))
    seen: dict[str, dict[int, object]] = {}
    for load_id, name, num, text in conn.execute(
            f"select load_id, name, value_num, value_text from facts where load_id in ({marks}) and name in "
            f"({', '.join('?' * len(CONTEXT_SETTINGS))}) order by line_id, id", [*load_ids, *CONTEXT_SETTINGS]):
        seen.setdefault(name, {})[load_id] = text if text is not None else num  # the last line of a load wins
    return {name: next(iter(set(v.values()))) for name, v in seen.items() if len(set(v.values())) == 1}


def _number(value) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def requantized(campaign_text: str | None) -> dict[str, str]:
    """model -> the model it was made from, as the frozen campaign states it (nothing when unreadable)."""
    try:
        models = tomllib.loads(campaign_text or "").get("models")
    except tomllib.TOMLDecodeError:
        return {}
    out = {}
    for m in models if isinstance(models, list) else ():
        if isinstance(m, dict) and isinstance(m.get("name"), str) and isinstance(m.get("requantized_from"), str):
            out[m["name"]] = m["requantized_from"]
    return out
