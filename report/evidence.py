"""Log evidence for the run article: each load's lines and facts, read-only.

The template ``sections/evidence_logs.md.j2`` renders what
:func:`run_evidence` returns: per load a fact table whose values link to
``#line-<id>``, and the raw lines, each with that anchor. Journal excerpts
are picked by fact (:func:`journal_excerpt`), never by a time window.
"""

from __future__ import annotations

import re
import sqlite3

from cardproof.daemon.store.stats import _intervals, percentile, rate_digits
from cardproof.daemon.campaign.evidence import crashed_loads, load_summaries
from cardproof.daemon.store import json_value

#: Facts whose lines tell the speculative-decoding story of a load.
SPEC_FACTS = ("spec_type", "spec_draft_n_max", "draft_model", "draft_context_mib", "draft_acceptance")
MEMORY_FACTS = ("model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib", "output_buffer_mib", "rs_buffer_mib",
                "draft_context_mib", "projector_mib")
OFFLOAD_FACTS = ("offloaded_layers", "total_layers")
ERROR_FACTS = ("cuda_error", "crash_signal")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DIGITS = {"MiB": 2, "s": 2, "ratio": 5}
_ARG_VALUE = re.compile(r"\bload:   [^-\s]")


def display_text(raw: str | None) -> str:
    """The stored line as a reader sees it: colour codes dropped, other control bytes shown as U+FFFD."""
    text = _ANSI.sub("", raw or "")
    return _CONTROL.sub("\ufffd", text)


def _cited_lines(conn, load_id: int) -> set[int]:
    """Lines the article links to beyond the facts: the runtime's memory self-report (the Memory section) and
    the command line the router printed for the load (the Setup section)."""
    from .setup import command_line_ids

    ids = set(command_line_ids(conn, load_id))
    try:
        rows = conn.execute("select line_ids_json from memory_selfreports where load_id = ?", [load_id]).fetchall()
    except sqlite3.OperationalError:  # a store without the table, opened read-only
        rows = []
    for (text,) in rows:
        ids |= {i for i in json_value(text, list, []) if isinstance(i, int)}
    return ids


def journal_excerpt(db, load_id: int, facts=SPEC_FACTS, *, limit: int = 8) -> list[dict]:
    """The lines that state ``facts`` for one load, in log order.

    For a fact printed once per request (draft acceptance) only its first and
    last line are quoted.
    """
    conn = db.conn if hasattr(db, "conn") else db
    marks = ", ".join("?" * len(facts))
    rows = conn.execute(
        f"select f.name, l.id, l.raw from facts f join log_lines l on l.id = f.line_id "
        f"where f.load_id = ? and f.name in ({marks}) order by l.id", [load_id, *facts]).fetchall()
    by_name: dict[str, list] = {}
    for name, lid, raw in rows:
        by_name.setdefault(name, []).append((lid, raw))
    picked = {}
    for name, found in by_name.items():
        keep = [found[0], found[-1]] if name == "draft_acceptance" else found
        for lid, raw in keep:
            picked[lid] = raw
    ids = sorted(picked)[:limit]
    # a router argument value ("load:   draft-simple") means little without its flag, the line before it
    flags = [i - 1 for i in ids if _ARG_VALUE.search(picked[i] or "") and i - 1 not in picked]
    if flags:
        marks = ", ".join("?" * len(flags))
        for lid, raw in conn.execute(f"select id, raw from log_lines where load_id = ? and id in ({marks})",
                                     [load_id, *flags]):
            picked[lid] = raw
            ids.append(lid)
    return [{"id": lid, "text": display_text(picked[lid])} for lid in sorted(ids)]


def _fact_rows(ld: dict) -> list[dict]:
    rows = []
    for name, value in ld["facts"].items():
        where = ld["fact_lines"][name]
        if name == "draft_acceptance":
            rows.append({"name": name, "device": None, "kind": "ratio", "value": value, "line_id": where[0],
                         "line_ids": where})
        elif name == "cuda_error":
            for text, lid in zip(value, where):
                rows.append({"name": name, "device": None, "kind": "text", "value": text, "line_id": lid})
        elif isinstance(value, dict):
            for device, v in value.items():
                rows.append(_row(name, device, v, where[device]))
        else:
            rows.append(_row(name, None, value, where))
    return rows


def _row(name: str, device, value, line_id: int) -> dict:
    if isinstance(value, (int, float)):
        unit = "MiB" if name.endswith("_mib") else ("s" if name.endswith("_seconds") else None)
        digits = _DIGITS.get(unit, 0) if not isinstance(value, int) else 0
        return {"name": name, "device": device, "kind": "num", "value": value, "unit": unit, "digits": digits,
                "line_id": line_id}
    return {"name": name, "device": device, "kind": "text", "value": value, "line_id": line_id}


def run_evidence(db, run_id: int, *, max_lines_per_load: int = 2000) -> dict:
    """Everything the log-evidence section shows for one run.

    ``loads``: per load ``id``, ``model``, ``origin``, ``port``, ``pid``,
    ``lines`` (count), ``facts``/``fact_lines`` (as :func:`load_summaries`),
    ``fact_rows`` (one row per value, with its ``line_id``), ``excerpt``
    (speculative-decoding lines), ``shown`` (lines to print: the first
    ``max_lines_per_load`` plus every line a fact points at) and
    ``not_shown`` (how many more lines the database holds).
    ``unattributed``: count and first lines of the run's lines that belong to
    no load; ``gaps``: capture gaps of the run's sources.
    """
    conn = db.conn if hasattr(db, "conn") else db
    loads = [ld for ld in load_summaries(db, run_id=run_id) if ld["lines"]]
    for ld in loads:
        ld["fact_rows"] = _fact_rows(ld)
        ld["excerpt"] = journal_excerpt(db, ld["id"], SPEC_FACTS)
        # every line a fact or an excerpt links to is printed, whatever the cap
        fact_ids = {r["line_id"] for r in ld["fact_rows"]} | {x["id"] for x in ld["excerpt"]} \
            | _variant_lines(conn, ld["id"]) | _cited_lines(conn, ld["id"])
        first = conn.execute("select id, raw from log_lines where load_id = ? order by id limit ?",
                             [ld["id"], max_lines_per_load]).fetchall()
        have = {lid for lid, _ in first}
        extra = sorted(fact_ids - have)
        if extra:
            marks = ", ".join("?" * len(extra))
            first += conn.execute(f"select id, raw from log_lines where id in ({marks})", extra).fetchall()
        ld["shown"] = [{"id": lid, "text": display_text(raw)} for lid, raw in sorted(first)]
        ld["not_shown"] = ld["lines"] - len(ld["shown"])
    n_un = conn.execute("select count(*) from log_lines where run_id = ? and load_id is null", [run_id]).fetchone()[0]
    un_lines = conn.execute("select id, raw from log_lines where run_id = ? and load_id is null order by id limit 200",
                            [run_id]).fetchall()
    gaps = conn.execute(
        "select g.at, g.reason, g.reason_json, g.lines_skipped, s.kind, s.name from capture_gaps g join log_sources s on s.id = g.source_id "
        "where g.source_id in (select distinct source_id from log_lines where run_id = ?) order by g.id", [run_id]).fetchall()
    shown = {x["id"] for ld in loads for x in ld["shown"]}
    crashes = [c | {"text": display_text(c["line"])[:300] if c["line"] else None,
                    "linked": c["line_id"] in shown, "logged": any(ld["id"] == c["id"] for ld in loads)}
               for c in crashed_loads(db, run_id)]
    return {
        "loads": loads,
        "crashes": crashes,  # the run's loads whose server process died (the article's Exceptions)
        "unattributed": {"count": n_un, "shown": [{"id": i, "text": display_text(r)} for i, r in un_lines]},
        "gaps": [dict(zip(("at", "reason", "reason_json", "lines_skipped", "kind", "name"), g)) for g in gaps],
        "total_lines": conn.execute("select count(*) from log_lines where run_id = ?", [run_id]).fetchone()[0],
        "steps": step_samples(db, run_id),
    }


def _variant_lines(conn, load_id: int) -> set[int]:
    """The lines a variant's argument checks cite (the Variants section links each verdict to one)."""
    from .variants import rederived  # the same check the section makes, over the same stored lines

    try:
        cur = conn.execute("select * from variants where load_id = ?", [load_id])
    except sqlite3.OperationalError:  # a database from before the variants
        return set()
    names = [d[0] for d in cur.description]
    return {c["line_id"] for row in cur.fetchall() for c in rederived(conn, dict(zip(names, row)))[1]
            if isinstance(c.get("line_id"), int)}


def fact_anchor(evidence: dict, load_id: int, name: str, device: str | None = None) -> str | None:
    """``#line-<id>`` of the line a fact of a load comes from, for links from other tables; None if unknown."""
    for ld in evidence.get("loads", []):
        if ld["id"] != load_id:
            continue
        where = ld["fact_lines"].get(name)
        if isinstance(where, dict):
            where = where.get(device)
        elif isinstance(where, list):
            where = where[0] if where else None
        return f"#line-{where}" if where is not None else None
    return None


def step_samples(db, run_id: int) -> list[dict]:
    """Every load, rate and depth step of a run with its samples, for the evidence page's step table.

    Each step: ``id``, ``axis``, ``model``, ``streams``/``rate_rps``/``depth_tokens``
    and ``samples`` (the sample row with the step's per-request columns:
    ``stream``, ``in_flight``, ``sent_s``, ``queue_ms``). The page gives each
    step the anchor ``step-<id>`` and links it back to ``fig-step-<id>``.
    """
    conn = db.conn if hasattr(db, "conn") else db
    try:
        cur = conn.execute(
            "select st.*, m.name as model from load_steps st left join models m on m.id = st.model_id "
            "where st.run_id = ? order by st.position, st.id", [run_id])
    except sqlite3.OperationalError:  # a database from before m015: no steps
        return []
    names = [d[0] for d in cur.description]
    steps = [dict(zip(names, row)) for row in cur.fetchall()]
    extra = {"stream", "in_flight", "sent_s", "queue_ms", "itl_ms_json"} & {
        r[1] for r in conn.execute("pragma table_info(load_samples)")}
    cols = ", ".join(f"ls.{c}" for c in sorted(extra))
    for st in steps:
        cur = conn.execute(
            f"select s.*{', ' + cols if cols else ''} from samples s left join load_samples ls on ls.sample_id = s.id "
            "where s.cell_id = ? order by s.id", [st["cell_id"]])
        snames = [d[0] for d in cur.description]
        st["samples"] = [dict(zip(snames, row)) for row in cur.fetchall()]
        st["rate_digits"] = rate_digits(st.get("rate_rps"))
        for smp in st["samples"]:  # the median interval between a request's streamed chunks (ITL)
            smp["itl_p50"] = percentile(_intervals(smp.pop("itl_ms_json", None)), 50)
        answered = [smp for smp in st["samples"] if not smp.get("error_kind")]
        # what the article's aggregate is made of: answered requests' tokens over the step's wall time
        st["generated"] = sum(smp.get("generated_tokens") or 0 for smp in answered)
        wall = st.get("wall_s")
        st["aggregate_tps"] = st["generated"] / wall if isinstance(wall, (int, float)) and wall > 0 and answered \
            else None
    return steps
