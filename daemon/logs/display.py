"""What ``cardproof loads``, ``logs import`` and ``logs show`` print about loads and their lines (text, JSON)."""

from __future__ import annotations

import json

from cardproof.daemon.store.crashes import SIGNALS, describe_end
from .lines import MAX_LINE_BYTES

#: the line limit as the summaries say it
LIMIT_TEXT = f"{MAX_LINE_BYTES / (1 << 20):g} MiB"
# refused lines named one by one in a summary; the rest are counted (all are in capture_gaps)
_NAMED_REFUSALS = 20

#: what ``cardproof loads --json`` and ``logs show --json`` give per load
LOAD_KEYS = ("id", "model", "origin", "run_id", "started_at", "ready_at", "ended_at", "end_reason", "open", "pid",
             "port", "status", "model_file", "facts", "fact_lines", "lines", "observed")
# why lines are in no load, as the import's one summary line says it (keys: attribution.py / processes.py)
UNPLACED_WHY = {
    "no_server": "outside any server process (before its start lines, after its exit, or a log that begins mid-run)",
    "no_model": "of a process that never named its model",
    "held": "waiting for their process to name its model",
    "proxy": "a proxy's own lines (llama-swap)",
    "router": "the router's own lines",
    "unknown_port": "of a router child whose spawn line is not in this log",
    "several_servers": "of a stream several servers wrote into (which line is whose cannot be proven)",
    "ollama_own": "Ollama's own lines (its configuration, GPU discovery, /api/show)",
    "ollama_shared": "written while more than one Ollama runner was loaded",
}


def unplaced_line(stats: dict) -> str | None:
    """One line: how many lines of an import are in no load, and why; None when all are placed."""
    if not stats.get("unattributed"):
        return None
    reasons = dict(stats.get("unplaced") or {})
    if stats.get("held"):
        reasons["held"] = stats["held"]
    known = sum(reasons.values())
    parts = [f"{n:,} {UNPLACED_WHY.get(k, k)}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1]) if n]
    if stats["unattributed"] > known:  # lines placed by an earlier import's state, or bound then unbound
        parts.append(f"{stats['unattributed'] - known:,} for no reason recorded in this import")
    refused = len(stats.get("refused") or ())
    if refused:  # "all stored" only when it is true: a refused line is in no load and not stored either
        parts.append(f"and {refused:,} line{'s' if refused != 1 else ''} longer than {LIMIT_TEXT} refused, "
                     f"not stored")
    return (f"{stats['unattributed']:,} lines in no load, {'stored' if refused else 'all stored'} verbatim "
            f"(`cardproof logs show --unplaced`): " + "; ".join(parts))


def refused_lines(stats: dict) -> list[str]:
    """One line per line an import refused as longer than the limit (where it is, how long); [] when none."""
    refused = stats.get("refused") or []
    out = []
    for r in refused[:_NAMED_REFUSALS]:
        where = f"journal entry {r['cursor']}" if "cursor" in r else f"line at byte {r['offset']:,}"
        out.append(f"refused {where}: {r['bytes']:,} bytes, longer than {LIMIT_TEXT}; not stored")
    if len(refused) > _NAMED_REFUSALS:
        out.append(f"and {len(refused) - _NAMED_REFUSALS:,} more (table capture_gaps)")
    return out


def _rate(spread: dict | None) -> str:
    if not spread:
        return "-"
    return f"{spread['median']:g} tok/s ({spread['min']:g}-{spread['max']:g}, n={spread['n']})"


def load_line(ld: dict) -> str:
    """One line per load for ``cardproof loads``."""
    f = ld["facts"]
    where = f"port {ld['port']}" if ld["port"] else (f"pid {ld['pid']}" if ld["pid"] else "-")
    parts = []
    if "offloaded_layers" in f:
        parts.append(f"offloaded {f['offloaded_layers']}/{f.get('total_layers', '?')}")
    if "ctx_size" in f:
        parts.append(f"ctx {f['ctx_size']}")
    elif "slot_ctx_size" in f:
        parts.append(f"ctx {f['slot_ctx_size']} per slot")
    if "slots" in f:
        parts.append(f"{f['slots']} slots")
    if "spec_type" in f:
        draft = f.get("draft_model")
        name = str(draft).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] if draft else None
        parts.append(f"spec {f['spec_type']}" + (f" (draft {name})" if name else ""))
    if "kv_cache_type_k" in f:
        parts.append(f"kv {f['kv_cache_type_k']}/{f.get('kv_cache_type_v', '?')}")
    if "cuda_error" in f:
        parts.append(f"device errors {len(f['cuda_error'])}")  # CUDA, ROCm, HIP or MUSA
    crash = _crash(ld)
    if crash:
        parts.insert(0, crash)
    obs = ld.get("observed") or {}
    if obs.get("count"):
        text = (f"observed {obs['count']} requests (server's counters, not measured): "
                f"decode {_rate(obs['decode_tps'])}, prefill {_rate(obs['prefill_tps'])}")
        if obs.get("draft_generated"):
            text += (f", draft acceptance {obs['draft_acceptance'] * 100:.1f}% "
                     f"({obs['draft_accepted']}/{obs['draft_generated']})")
        parts.append(text)
    state = "open" if ld.get("open") else (ld.get("end_reason") or "")
    return (f"{ld['id']:>5}  {str(ld['model']):<24} {ld['origin']:<6} {where:<11} {state:<14.14} "
            f"{ld['lines']:>7} lines  {len(f):>2} facts  {'; '.join(parts)}")


def _crash(ld: dict) -> str | None:
    """How the load's process died, with what that signal usually means; None when it did not crash."""
    said = describe_end(ld.get("end_reason"))
    sig = SIGNALS.get(ld["facts"].get("crash_signal") or "")
    if said and sig and sig.key not in said:  # an assert or CUDA error named it: the signal that followed
        said += f"; {sig.describe()}"
    elif said is None and sig is not None:  # a crash line in a load that ended otherwise
        said = f"crash line: {sig.describe()}"
    return said


def _visible(raw: str) -> str:
    """A stored line as a terminal may show it: control characters (colour codes) escaped, not executed."""
    if raw.isprintable():
        return raw
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in raw)


def show(store, load_id: int | None, *, unplaced: bool, limit: int | None, as_json: bool, echo) -> str | None:
    """Print a load's lines (or the unplaced ones); returns an error message, or None."""
    from .observed import observed_rows
    from .summary import load_summaries

    db = store.db
    cap = f" limit {int(limit)}" if limit else ""
    if unplaced:
        rows = db.execute("select id, ts, attribution, raw from log_lines where load_id is null order by id" + cap)
        load = None
    else:
        found = load_summaries(db, load_ids=[load_id])
        if not found:
            merged = db.execute("select merged_into from loads where id = ?", [load_id]).fetchone()
            if merged and merged[0]:
                return f"load {load_id} was linked to the run's load {merged[0]}: `cardproof logs show {merged[0]}`"
            return f"no load {load_id} in {store.path} (see `cardproof loads`)"
        load = found[0]
        rows = db.execute("select id, ts, attribution, raw from log_lines where load_id = ? order by id" + cap,
                          [load_id])
    lines = [{"id": r[0], "ts": r[1], "attribution": r[2], "text": r[3]} for r in rows]
    if as_json:
        out = {"lines": lines}
        if load is not None:
            out["load"] = {k: load.get(k) for k in LOAD_KEYS}
            out["observed_requests"] = observed_rows(db.conn, [load_id]).get(load_id, [])
        echo(json.dumps(out, indent=2, ensure_ascii=False))
        return None
    if load is not None:
        echo(load_line(load))
    for ln in lines:
        echo(f"{ln['id']:>8}  {_visible(ln['text'])}")
    if not lines:
        echo("no lines" if load is None else f"load {load_id} has no stored lines")
    return None
