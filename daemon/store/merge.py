"""``cardproof merge OTHER.db``: another host's runs into this database, once.

A run is identified by where and when it ran and what it ran: host,
``started_at`` and the campaign's SHA-256. Merging is idempotent: a run
already here is left alone; one that is here but differs (the other copy
finished later, say) is reported as a conflict and never overwritten. A
run still ``running`` over there is skipped until it has ended.

Everything that belongs to a run comes along: its campaign (shared by
hash), models (shared by name and digest), cells, samples, gate results,
canaries, loads, log lines and their facts, access-log requests, memory
readings and self-reports, and rows of tables this module does not know
(probes, say) that point at the run, its cells, samples or loads. Log
sources come under a name of their own (``merged:HOST:...``) so that the
local capture never resumes from another host's cursor. llama-bench
imports come along by their file hash.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cardproof.daemon.store.mergecopy import Copier, in_list, tables
from cardproof.daemon.store import Store, dumps, utcnow
from cardproof.daemon.store.file import connect_readonly

#: tables the merge handles itself, or that belong to one host's daemon
HANDLED = {"campaigns", "runs", "models", "log_sources", "cells", "loads", "samples", "log_lines", "facts",
           "gate_results", "canaries", "cell_checks", "memory_samples", "memory_selfreports", "memory_load_pids",
           "memory_load_stats", "memory_free_checks", "requests_seen", "quiet_waits", "llama_bench_imports",
           "llama_bench_results", "merges", "capture_gaps", "daemon_queue", "daemon_queue_runs",
           "daemon_state", "_sqlite_migrations",
           "row_changes"}  # row_changes: triggers of this file count its own changes (migrations.py m022)
#: fields that must agree for a run found on both sides to count as the same copy
SIGNATURE = ("status", "ended_at", "exit_code", "samples_planned", "samples_measured", "samples_failed")
_ANCHORS = ("run_id", "cell_id", "sample_id", "load_id")


class MergeError(Exception):
    """The other database cannot be merged; str() names the file."""


def open_source(path: Path | str, target: Path | None = None) -> sqlite3.Connection:
    """The other database, read-only, after checking that it is a cardproof store."""
    path = Path(path)
    if not path.is_file():
        raise MergeError(f"{path}: no such database")
    if target is not None and path.resolve() == Path(target).resolve():
        raise MergeError(f"{path}: is the target database itself")
    try:
        conn = connect_readonly(path)
        names = set(tables(conn))
    except sqlite3.DatabaseError as exc:
        raise MergeError(f"{path}: cannot read database: {exc}") from exc
    if not {"runs", "campaigns", "samples"} <= names:
        conn.close()
        raise MergeError(f"{path}: not a cardproof database (no runs, campaigns or samples table)")
    return conn


def identity(run: dict, sha256: str) -> tuple[str, str, str]:
    return (run.get("host") or "", run.get("started_at") or "", sha256 or "")


def _rows(conn, sql, params=()) -> list[dict]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def merge_database(store: Store, other: Path | str) -> dict:
    """Merge ``other`` into ``store``; returns what was merged, already present, in conflict or skipped."""
    src = open_source(other, store.path)
    dst = store.db.conn
    report = {"source": str(Path(other).resolve()), "merged": [], "present": [], "conflicts": [],
              "skipped": [], "warnings": [], "llama_bench": 0}
    try:
        ours = set(r[0] for r in dst.execute("select name from _sqlite_migrations"))
        if "_sqlite_migrations" in tables(src):
            newer = sorted({r[0] for r in src.execute("select name from _sqlite_migrations")} - ours)
            if newer:
                report["warnings"].append(f"the other database has migrations this version lacks: {', '.join(newer)}")
        runs = _rows(src, "select r.*, c.sha256 as campaign_sha256 from runs r "
                          "left join campaigns c on c.id = r.campaign_id order by r.id")
        for run in runs:
            _merge_run(store, src, run, report)
        report["llama_bench"] = _merge_llama_bench(store, src, report)
    finally:
        src.close()
    with dst:
        dst.execute("insert into merges (source_path, at, runs_merged, runs_present, conflicts, report_json) "
                    "values (?, ?, ?, ?, ?, ?)",
                    [report["source"], utcnow(), len(report["merged"]), len(report["present"]),
                     len(report["conflicts"]), dumps(report)])
    return report


def _find(store: Store, ident: tuple[str, str, str]) -> dict | None:
    rows = _rows(store.db.conn, "select r.* from runs r join campaigns c on c.id = r.campaign_id "
                                "where coalesce(r.host, '') = ? and r.started_at = ? and c.sha256 = ?", ident)
    return rows[0] if rows else None


def _merge_run(store: Store, src, run: dict, report: dict) -> None:
    ident = identity(run, run.get("campaign_sha256"))
    label = {"host": ident[0], "started_at": ident[1], "campaign_sha256": ident[2], "source_run_id": run["id"]}
    if run.get("status") == "running":
        report["skipped"].append(label | {"reason": "still running on the other host; merge again once it ended"})
        return
    if not run.get("campaign_sha256"):
        report["skipped"].append(label | {"reason": "run has no campaign"})
        return
    mine = _find(store, ident)
    if mine is not None:
        n_theirs = src.execute("select count(*) from samples where run_id = ?", [run["id"]]).fetchone()[0]
        n_mine = store.db.execute("select count(*) from samples where run_id = ?", [mine["id"]]).fetchone()[0]
        diff = {k: [mine.get(k), run.get(k)] for k in SIGNATURE if mine.get(k) != run.get(k)}
        if n_theirs != n_mine:
            diff["samples"] = [n_mine, n_theirs]
        entry = label | {"run_id": mine["id"]}
        if diff:
            report["conflicts"].append(entry | {"differs": diff, "kept": "this database's copy"})
        else:
            report["present"].append(entry)
        return
    conn = store.db.conn
    conn.execute("BEGIN IMMEDIATE")  # ids are handed out in blocks: nobody else may write meanwhile
    try:
        cp = Copier(src, conn)
        new_run = _copy_run(store, src, cp, run)
        conn.commit()
    except Exception:
        conn.rollback()
        raise
    entry = label | {"run_id": new_run}
    if cp.dropped_pointers:
        entry["dropped_pointers"] = cp.dropped_pointers
    if cp.dropped_columns:
        report["warnings"].append(f"columns this version lacks were not merged: {dumps(cp.dropped_columns)}")
    report["merged"].append(entry)


def _copy_run(store: Store, src, cp: Copier, run: dict) -> int:
    rid = run["id"]
    host = run.get("host") or "unknown-host"
    # campaign: the same text (same hash) is one row
    camp = store.db.execute("select id from campaigns where sha256 = ?", [run["campaign_sha256"]]).fetchone()
    if camp:
        cp.maps["campaigns"] = {run["campaign_id"]: camp[0]}
    else:
        cp.copy("campaigns", "id = ?", [run["campaign_id"]])
    _map_models(store, src, cp, rid)
    cp.copy("runs", "id = ?", [rid], set_values={"merged_from": f"{host}:{Path(src_path(src)).name}",
                                                 "merged_at": utcnow()})
    load_ids = [r[0] for r in src.execute("select id from loads where run_id = ?", [rid])]
    line_where = "run_id = ? or load_id in (select id from loads where run_id = ?)"
    _map_sources(store, src, cp, host, line_where, rid)
    cp.copy("cells", "run_id = ?", [rid])
    cp.copy("loads", "run_id = ?", [rid], defer=("sample_id", "start_line_id", "ready_line_id", "end_line_id",
                                                  "merged_into"))
    cp.copy("samples", "run_id = ?", [rid])
    if "log_lines" in tables(src):
        cp.copy("log_lines", line_where, [rid, rid])
    cp.fix_deferred()
    for table, col, ids in (("facts", "line_id", cp.ids("log_lines")), ("facts", "load_id", load_ids),
                            ("gate_results", "sample_id", cp.ids("samples")),
                            ("cell_checks", "cell_id", cp.ids("cells")),
                            ("memory_load_pids", "load_id", load_ids)):
        if table in tables(src):
            cp.copy(table, *in_list(col, ids))
    for table in ("canaries", "memory_samples", "memory_load_stats", "memory_free_checks", "requests_seen"):
        if table in tables(src):
            cp.copy(table, "run_id = ?", [rid])
    if "memory_selfreports" in tables(src):
        cp.copy("memory_selfreports", "run_id = ? or load_id in (select id from loads where run_id = ?)", [rid, rid])
    if "quiet_waits" in tables(src):
        # the wait is evidence about the run; the queue and daemon rows stay on their host
        cp.copy("quiet_waits", "run_id = ?", [rid], set_values={"queue_id": None, "daemon_id": None})
    cp.fix_deferred()
    _copy_unknown(store, src, cp, rid)
    return cp.maps["runs"][rid]


def src_path(conn) -> str:
    row = conn.execute("pragma database_list").fetchone()
    return row[2] if row else ""


def _map_models(store: Store, src, cp: Copier, rid: int) -> None:
    """Same name and digest: the same model. Without a digest, only the same name and path is."""
    # every table that ties a model to a run: cells, loads, and e.g. probe results
    holders = [t for t in tables(src) if {"run_id", "model_id"} <= set(_cols(src, t))]
    ids = {r[0] for t in holders for r in src.execute(f"select distinct model_id from [{t}] where run_id = ?", [rid])
           if r[0] is not None}
    mapping = cp.maps.setdefault("models", {})
    for m in _rows(src, "select * from models where id in (select value from json_each(?))", [json.dumps(sorted(ids))]):
        if m.get("digest"):
            row = store.db.execute("select id from models where name = ? and digest = ?", [m["name"], m["digest"]]).fetchone()
        else:
            row = store.db.execute("select id from models where name = ? and digest is null and coalesce(path, '') = ?",
                                   [m["name"], m.get("path") or ""]).fetchone()
        if row:
            mapping[m["id"]] = row[0]
        else:
            cp.copy("models", "id = ?", [m["id"]])


def _map_sources(store: Store, src, cp: Copier, host: str, line_where: str, rid: int) -> None:
    if "log_sources" not in tables(src) or "log_lines" not in tables(src):
        return
    mapping = cp.maps.setdefault("log_sources", {})
    for s in _rows(src, f"select * from log_sources where id in (select distinct source_id from log_lines "
                        f"where {line_where})", [rid, rid]):
        name = s["name"] if s["name"].startswith("merged:") else f"merged:{host}:{s['name']}"
        row = store.db.execute("select id from log_sources where kind = ? and name = ?", [s["kind"], name]).fetchone()
        if row:
            mapping[s["id"]] = row[0]
        else:
            cur = store.db.conn.execute("insert into log_sources (kind, name, updated_at) values (?, ?, ?)",
                                        [s["kind"], name, s.get("updated_at")])
            mapping[s["id"]] = cur.lastrowid


def _copy_unknown(store: Store, src, cp: Copier, rid: int) -> None:
    """Tables added by other features (probes, ...): rows pointing at this run's rows come along.

    Their own ``<name>_id`` columns are remapped when ``<name>s`` was copied
    before them (so a results table follows its parent table).
    """
    ours = set(tables(store.db.conn))
    unknown = [t for t in tables(src) if t not in HANDLED and t in ours and not t.startswith("sqlite_")]
    for t in unknown:
        cp.pointers.setdefault(f"{t[:-1]}_id", t)
    # parents first: a table whose name another one points at goes earlier
    unknown.sort(key=lambda t: sum(1 for c in _cols(src, t) if cp.pointers.get(c) in unknown and c != "id"))
    for t in unknown:
        cols = _cols(src, t)
        anchors = [c for c in _ANCHORS if c in cols]
        own = [c for c in cols if cp.pointers.get(c) in unknown and cp.pointers.get(c) != t]
        clauses, params = [], []
        for c in anchors + own:
            ids = cp.ids(cp.pointers[c]) if c != "run_id" else [rid]
            clause, p = in_list(c, ids)
            clauses.append(clause)
            params += p
        if clauses:
            cp.copy(t, " or ".join(clauses), params)
    cp.fix_deferred()


def _cols(conn, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"pragma table_info([{table}])")]


def _merge_llama_bench(store: Store, src, report: dict) -> int:
    """llama-bench imports by file hash: one already here is not imported twice."""
    if "llama_bench_imports" not in tables(src):
        return 0
    done = 0
    for imp in _rows(src, "select * from llama_bench_imports order by id"):
        if store.db.execute("select 1 from llama_bench_imports where sha256 = ?", [imp["sha256"]]).fetchone():
            continue
        conn = store.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            cp = Copier(src, conn)
            cp.copy("llama_bench_imports", "id = ?", [imp["id"]])
            cp.copy("llama_bench_results", "import_id = ?", [imp["id"]])
            conn.commit()
        except Exception:
            conn.rollback()
            raise
        done += 1
    return done
