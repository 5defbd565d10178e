"""What ``cardproof status`` shows, read from the database by another process.

Principle 10: "never heard of it" must not read like "fine". The daemon is
called running only when its newest heartbeat is fresh (and, on the same
host, its PID is alive); a stale heartbeat is reported as such, with the
state the daemon last wrote, and a database that never saw a daemon says so.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone

from cardproof.daemon.store.liveness import effective_runs
from ..store import Store


def _age_s(ts: str | None, now: datetime) -> float | None:
    if not ts:
        return None
    return (now - datetime.fromisoformat(ts)).total_seconds()


def _pid_alive(pid: int | None) -> bool | None:
    if not pid:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user (the service user)
        return True
    return True


def never_run(db: str, why: str | None = None) -> dict:
    """The status of a database no daemon has written to (``why``: e.g. there is no such file)."""
    text = f"no daemon has run on {db}" + (f" ({why})" if why else "")
    return {"db": db, "daemon": {"verdict": "never started", "text": text}, "queue": [], "runs_running": []}


def daemon_status(store: Store, *, now: datetime | None = None) -> dict:
    """Daemon, current run, queue and last quiet wait as one JSON-able dict."""
    now = now or datetime.now(timezone.utc)
    db = store.db
    row = db.execute("select * from daemon_state order by id desc limit 1").fetchone()
    out: dict = {"db": str(store.path)}
    if row is None:
        out["daemon"] = never_run(str(store.path))["daemon"]
    else:
        d = dict(zip([c[0] for c in db.execute("select * from daemon_state limit 0").description], row))
        age = _age_s(d["heartbeat_at"], now)
        period = d["heartbeat_s"] or 5.0
        same_host = d["host"] == socket.gethostname()
        alive = _pid_alive(d["pid"]) if same_host else None
        if d["state"] == "stopped":
            verdict = "stopped"
            text = f"stopped at {d['stopped_at'][:19]} ({d['exit_reason']})"
        elif age is not None and age <= 3 * period and alive is not False:
            verdict = "running"
            text = f"running: pid {d['pid']} on {d['host']}, heartbeat {age:.0f} s ago, {d['status_text']}"
        else:
            verdict = "dead"
            how = "its process is gone" if alive is False else f"no heartbeat for {age:.0f} s"
            text = (f"not running: last state '{d['state']}' at {(d['heartbeat_at'] or '?')[:19]}, {how} "
                    f"(killed or crashed; the next start marks its run interrupted)")
        out["daemon"] = {
            "verdict": verdict, "text": text, "id": d["id"], "pid": d["pid"], "host": d["host"],
            "state": d["state"], "started_at": d["started_at"], "heartbeat_at": d["heartbeat_at"],
            "heartbeat_age_s": age, "config_path": d["config_path"],
            "progress": json.loads(d["progress_json"]) if d["progress_json"] else None,
            "collectors": json.loads(d["collectors_json"]) if d["collectors_json"] else {},
            "recovered": json.loads(d["recovered_json"]) if d["recovered_json"] else [],
        }
    out["queue"] = [dict(r) for r in db.query(
        "select id, campaign_name, status, attempts, last_run_id, enqueued_at, finished_at, reason "
        "from daemon_queue where status in ('queued', 'running') or id in "
        "(select id from daemon_queue where status not in ('queued', 'running') order by id desc limit 5) "
        "order by id")]
    # stored as running; 'status' says whether its process still is (daemon/store/liveness.py)
    out["runs_running"] = [
        {k: r.get(k) for k in ("id", "started_at", "samples_planned", "samples_measured", "queue_id", "status",
                               "liveness")}
        for r in effective_runs(db, [dict(r) for r in db.query(
            "select r.*, q.queue_id from runs r "
            "left join daemon_queue_runs q on q.run_id = r.id where r.status = 'running' order by r.id")])]
    wait = db.execute("select * from quiet_waits order by id desc limit 1").fetchone()
    if wait is not None:
        cols = [c[0] for c in db.execute("select * from quiet_waits limit 0").description]
        w = dict(zip(cols, wait))
        out["last_quiet_wait"] = {k: w[k] for k in ("queue_id", "run_id", "started_at", "ended_at", "outcome",
                                                    "waited_s", "foreign_tokens", "foreign_requests", "reason")}
    return out


def format_status(s: dict) -> list[str]:
    """Plain-text lines for the terminal."""
    lines = [f"daemon: {s['daemon']['text']}"]
    d = s["daemon"]
    p = d.get("progress") or {}
    if d.get("verdict") == "running" and p.get("run_id") is not None:
        cov = f"{p['coverage']:.0%}" if p.get("coverage") is not None else "-"
        tps = f"{p['last_decode_tps']:.1f} tok/s" if p.get("last_decode_tps") is not None else "-"
        lines.append(f"run {p['run_id']} ({p.get('campaign')}): {p['done']}/{p['planned']} samples, "
                     f"cell {p.get('model')} {p.get('prompt_class')} rep {p.get('repetition')}/{p.get('repetitions')}, "
                     f"coverage {cov}, last decode {tps}")
    for name, st in (d.get("collectors") or {}).items():
        extra = st.get("reason") or st.get("error") or st.get("url") or ""
        lines.append(f"collector {name}: {st.get('state')}" + (f" ({extra})" if extra else ""))
    for r in s["runs_running"]:
        owner = f"queue entry {r['queue_id']}" if r["queue_id"] else "not the daemon's (a foreground run?)"
        lines.append(f"run {r['id']} marked running since {(r['started_at'] or '?')[:19]}: {owner}"
                     + (f"; now {r['status']}: {r['liveness']}" if r.get("liveness") else ""))
    if s["queue"]:
        lines.append("queue:")
        for q in s["queue"]:
            run = f" run {q['last_run_id']}" if q["last_run_id"] else ""
            lines.append(f"  {q['id']:>4} {q['status']:<9} {q['campaign_name']} (attempts {q['attempts']}){run}"
                         + (f": {q['reason']}" if q["reason"] else ""))
    else:
        lines.append("queue: empty")
    w = s.get("last_quiet_wait")
    if w:
        lines.append(f"last quiet wait: {w['outcome']} after {w['waited_s'] or 0:.0f} s"
                     + (f": {w['reason']}" if w["reason"] else ""))
    return lines
