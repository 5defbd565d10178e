"""Link the loads seen in a server log to the runner's ``loads`` rows of a run.

The runner knows which loads it asked for (model, time, often the router
port); the log knows which lines each load printed. A log load and a runner
load are the same load when they share model name and port, or else --
for loads the runner saw happen -- when they are the n-th load of the same
model in both. Time is never used to pair them.
"""

from __future__ import annotations

from cardproof.daemon.server.modelfile import blob_digest
from ..store import Store

# runner rows that stand for a real load; "already_loaded" happened before the run
_REAL_LOAD = ("loaded", "failed")
_COPY = ("port", "pid", "model_name", "model_file", "source_id", "start_line_id", "ready_line_id",
         "end_line_id", "exit_status")


def attribute_run(store: Store, run_id: int) -> dict:
    """Pair log loads with the run's runner loads and move their lines and facts over.

    Fills ``loads.port``/``pid`` where the runner left them empty, sets
    ``log_lines.load_id`` and ``facts.load_id`` to the runner's load id and
    marks the log row ``merged_into``. Idempotent. Returns
    ``{"matched": [(runner_id, log_id, how)], "runner_unmatched": [...], "log_unmatched": [...]}``.
    """
    conn = store.db.conn
    with conn:
        runner = [dict(zip(("id", "model", "port", "status", "file"), r)) for r in conn.execute(
            "select l.id, m.name, l.port, l.status, l.model_file from loads l left join models m on m.id = l.model_id "
            "where l.run_id = ? and l.origin is null order by l.id", [run_id])]
        logged = [dict(zip(("id", "model", "port", "run_id", "file"), r)) for r in conn.execute(
            "select id, model_name, port, run_id, model_file from loads where origin = 'log' and merged_into is null "
            "and (run_id = ? or run_id is null) order by id", [run_id])]
        for row in runner + logged:
            row["blob"] = blob_digest(row["file"])
        used: set[int] = set()
        matched: list[tuple[int, int, str]] = []
        # 1. same model and port: the router's own identity for a child
        for r in runner:
            if r["port"] is None:
                continue
            for lg in logged:
                if lg["id"] not in used and lg["model"] == r["model"] and lg["port"] == r["port"]:
                    matched.append((r["id"], lg["id"], "port"))
                    used.add(lg["id"])
                    r["done"] = True
                    break
        # 2. the n-th real load of a model in the run is the n-th spawn of it in the log; Ollama's
        #    log names a model by its blob (sha256-<hex>), which the runner took from /api/show
        for r in runner:
            if r.get("done") or r["status"] not in _REAL_LOAD:
                continue
            for lg in logged:
                same = lg["model"] == r["model"] or (r["blob"] is not None and lg["blob"] == r["blob"])
                if lg["id"] not in used and lg["run_id"] == run_id and same:
                    matched.append((r["id"], lg["id"], "order"))
                    used.add(lg["id"])
                    r["done"] = True
                    break
        for runner_id, log_id, _ in matched:
            _merge(conn, runner_id, log_id)
        # lines that reached a merged log load later (a capture after linking) follow it
        for log_id, runner_id in conn.execute(
                "select id, merged_into from loads where origin = 'log' and merged_into is not null "
                "and run_id = ?", [run_id]).fetchall():
            conn.execute("update log_lines set load_id = ? where load_id = ?", [runner_id, log_id])
            conn.execute("update facts set load_id = ? where load_id = ?", [runner_id, log_id])
    return {
        "matched": matched,
        "runner_unmatched": [r["id"] for r in runner if not r.get("done")],
        "log_unmatched": [lg["id"] for lg in logged if lg["id"] not in used and lg["run_id"] == run_id],
    }


def _merge(conn, runner_id: int, log_id: int) -> None:
    cols = ", ".join(_COPY)
    log_row = dict(zip(_COPY, conn.execute(f"select {cols} from loads where id = ?", [log_id]).fetchone()))
    runner_row = dict(zip(_COPY, conn.execute(f"select {cols} from loads where id = ?", [runner_id]).fetchone()))
    # the runner's own values stay; the log fills what it left empty
    fill = {k: v for k, v in log_row.items() if v is not None and runner_row.get(k) is None}
    # the runner knows when it stopped using a load ("next model", "run ended"); how its process died
    # only the log can say, and that is how the load ended
    crash = conn.execute("select end_reason, exit_status, end_line_id from loads where id = ? "
                         "and end_reason like 'crashed: %'", [log_id]).fetchone()
    if crash:
        fill.update(end_reason=crash[0], exit_status=crash[1], end_line_id=crash[2])
    if fill:
        conn.execute(f"update loads set {', '.join(f'{k} = ?' for k in fill)} where id = ?", [*fill.values(), runner_id])
    conn.execute("update log_lines set load_id = ? where load_id = ?", [runner_id, log_id])
    conn.execute("update facts set load_id = ? where load_id = ?", [runner_id, log_id])
    conn.execute("update loads set merged_into = ? where id = ?", [runner_id, log_id])
