"""Whether a run marked ``running`` still has a process behind it.

A SIGKILL, an OOM kill or a power cut leaves the run row at ``running``: the
runner never gets to write its end. Two signs die with the process, so no
reader has to wait for a heartbeat to go "late":

- the runner holds an exclusive ``flock`` on ``<db>.run-<id>.lock`` for the
  whole run; the kernel drops it when the process ends, however it ends;
- the run row names the process: pid, its start time in clock ticks since
  boot (a reused pid has another), the boot id and the pid namespace.

``judge`` decides from these alone and writes nothing, so read-only commands
can show the effective status; ``reconcile_runs`` is for entry points that
may write (the next ``cardproof run``, daemon start) and persists
``interrupted`` only where this machine proved the process gone. A run
recorded on another machine cannot be checked from here: it shows as running
there until nothing was heard from it for ``STALE_AFTER_S``, then ``stale``.
Neither is ever taken for a finished run.

In short, ``liveness.py``: whether a run marked ``running`` still has its process (a
``flock`` on ``<db>.run-<id>.lock`` plus pid, start time and boot id); readers show the effective
status, writers persist ``interrupted``
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sqlite3
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil

# A remote run is only "stale" after an hour without a sample or a load: one
# model load or one long request may take many minutes on a large card.
STALE_AFTER_S = 3600.0


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


# boot id, pid namespace and start ticks are read from /proc by hand: psutil has no boot id or
# namespace, and gives a process's start as float seconds derived from these ticks; the
# stored identity is the exact integer (a rounded float could call a live process gone).
def boot_id() -> str | None:
    """This kernel's boot id (Linux): it changes with every boot."""
    return _read("/proc/sys/kernel/random/boot_id")


def pid_namespace() -> str | None:
    """Our pid namespace: a pid means the same process only within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot; None when there is no such process."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    try:  # the command name may hold spaces and parentheses: fields follow the last ')'
        return int(text.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def this_process() -> dict:
    """The columns that name the running process in its run row."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_start_ticks": start_ticks(pid),
            "boot_id": boot_id(), "pid_ns": pid_namespace()}


def lock_path(db_file: str | Path, run_id: int) -> Path:
    return Path(f"{db_file}.run-{run_id}.lock")


class RunLock:
    """The flock a runner holds for its run's whole life.

    It is taken on a freshly made file and only then renamed to the run's
    name, so a file under that name is never seen unlocked while the runner
    lives. ``release(finished=True)`` (the status is written) removes it;
    any other end leaves it, unlocked: proof for readers that the run ended
    without writing its status.
    """

    def __init__(self, db_file: str | Path):
        self.db_file = Path(os.path.realpath(db_file))  # readers find it by the database's real path
        self.fd: int | None = None
        self.path: Path | None = None
        self.warning: str | None = None

    def __enter__(self) -> "RunLock":
        try:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"{self.db_file.name}.run-new.", suffix=".lock",
                                        dir=self.db_file.parent)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # the pid check still tells a dead run apart
            self.warning = f"{self.db_file}: no run lock ({exc.strerror or exc}); liveness from the pid alone"
            return self
        self.fd, self.path = fd, Path(name)
        return self

    def bind(self, run_id: int, identity: dict) -> None:
        """Give the held lock the run's name; its text says whose it is."""
        if self.fd is None:
            return
        final = lock_path(self.db_file, run_id)
        try:
            os.write(self.fd, json.dumps({"run_id": run_id, **identity}).encode())
            os.replace(self.path, final)
        except OSError as exc:
            self.warning = f"{final}: cannot name the run lock ({exc.strerror or exc})"
            return
        self.path = final

    def release(self, *, finished: bool) -> None:
        if self.fd is None:
            return
        if finished and self.path is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
        os.close(self.fd)
        self.fd = None

    def __exit__(self, *exc) -> None:
        self.release(finished=False)


def _lock_state(db_file: str | None, row: dict) -> str:
    """``held`` / ``free`` for this run's own lock file, else ``absent``."""
    if not db_file:
        return "absent"
    try:
        fd = os.open(lock_path(db_file, row["id"]), os.O_RDONLY)
    except OSError:
        return "absent"
    try:
        try:
            owner = json.loads(os.read(fd, 4096) or b"{}")
        except ValueError:
            return "absent"
        # a file left by another database of the same name, or an earlier run id, is not this run's
        if not isinstance(owner, dict) or (owner.get("run_id"), owner.get("pid"), owner.get("pid_start_ticks")) != (
                row["id"], row.get("pid"), row.get("pid_start_ticks")):
            return "absent"
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return "held"
        except OSError:
            return "absent"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return "free"
    finally:
        os.close(fd)


def parse_ts(ts) -> datetime | None:
    """A stored timestamp as aware UTC; None for anything unreadable (never a crash)."""
    if not ts:
        return None
    try:
        dt = datetime.fromisoformat(str(ts))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _boot_time() -> datetime | None:
    try:
        return datetime.fromtimestamp(psutil.boot_time(), timezone.utc)
    except (psutil.Error, OSError, ValueError):
        return None


@dataclass(frozen=True)
class Verdict:
    status: str  # running | interrupted | stale
    reason: str  # one line, for `cardproof runs`, the article, the error text
    proven: bool = False  # this machine proved the process gone: may be written


def judge(row: dict, *, db_file: str | None, last_seen_at: str | None, here: dict | None = None,
          now: datetime | None = None) -> Verdict:
    """What a row stored as ``running`` really is. Reads /proc and probes the lock; writes nothing."""
    here = here or this_process()
    now = now or datetime.now(timezone.utc)
    host = row.get("host") or "?"
    pid = row.get("pid")
    same_boot = bool(row.get("boot_id")) and row.get("boot_id") == here["boot_id"]
    if row.get("boot_id") and not same_boot and host == here["host"] and not row.get("merged_from"):
        return Verdict("interrupted", f"process gone (pid {pid} on host {host}): the machine booted again since", True)
    if not row.get("boot_id") and host == here["host"] and pid is None:
        boot, started = _boot_time(), parse_ts(row.get("started_at"))
        if boot and started and started < boot:
            return Verdict("interrupted", f"process gone: the run on host {host} started before the last boot", True)
    if same_boot and pid is not None:
        lock = _lock_state(db_file, row)
        if lock == "held":
            return Verdict("running", f"pid {pid} on host {host} holds the run's lock")
        if lock == "free":
            return Verdict("interrupted", f"process gone (pid {pid} on host {host}): it no longer holds "
                                          "the run's lock", True)
        if row.get("pid_ns") == here["pid_ns"]:  # before the lock was named, or no lock could be made
            ticks = start_ticks(pid)
            if ticks is None:
                return Verdict("interrupted", f"process gone (pid {pid} on host {host})", True)
            if row.get("pid_start_ticks") is not None and ticks != row["pid_start_ticks"]:
                return Verdict("interrupted", f"process gone (pid {pid} on host {host} is another process now)",
                               True)
            return Verdict("running", f"pid {pid} on host {host} is alive")
    # another machine, another pid namespace, or a row from before liveness was recorded
    seen = parse_ts(last_seen_at) or parse_ts(row.get("started_at"))
    age = (now - seen).total_seconds() if seen else None
    where = f"on host {host}" + ("" if host != here["host"] else " (not checkable from here)")
    last = f"last seen {seen.isoformat(timespec='seconds')}" if seen else "never seen"
    if age is None or age > STALE_AFTER_S:
        return Verdict("stale", f"marked running {where}, {last}; nothing heard for over {STALE_AFTER_S / 3600:g} h")
    return Verdict("running", f"marked running {where}, {last}")


def db_file(db) -> str | None:
    """The file behind a sqlite-utils Database (or sqlite3 connection); None in memory."""
    conn = getattr(db, "conn", db)
    try:
        for _, name, path in conn.execute("pragma database_list"):
            if name == "main":
                return os.path.realpath(path) if path else None
    except sqlite3.Error:
        return None
    return None


def _progress(db, ids: list[int]) -> dict[int, dict]:
    """Per run: measured and failed samples as stored, and the last sign of life."""
    out: dict[int, dict] = {}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))
    for rid, measured, failed in db.execute(
            f"select run_id, sum(error_kind is null), sum(error_kind is not null) from samples "
            f"where run_id in ({marks}) and coalesce(kind, 'measure') = 'measure' group by run_id", ids):
        out[rid] = {"measured": int(measured or 0), "failed": int(failed or 0)}
    seen: dict[int, list] = {}
    for rid, ts in db.execute(f"select run_id, max(started_at) from samples where run_id in ({marks}) "
                              f"group by run_id", ids):
        out.setdefault(rid, {})["last_sample_at"] = ts
        seen.setdefault(rid, []).append(ts)
    for rid, a, b in db.execute(f"select run_id, max(requested_at), max(ready_at) from loads "
                                f"where run_id in ({marks}) group by run_id", ids):
        seen.setdefault(rid, []).extend([a, b])
    for rid, stamps in seen.items():
        parsed = [(parse_ts(s), s) for s in stamps if parse_ts(s)]
        out.setdefault(rid, {})["last_seen_at"] = max(parsed)[1] if parsed else None
    return out


def _apply(row: dict, verdict: Verdict, prog: dict) -> dict:
    measured, failed = prog.get("measured", 0), prog.get("failed", 0)
    planned = row.get("samples_planned")
    planned = planned if isinstance(planned, (int, float)) and planned > 0 else 0  # a damaged row: no ratio
    last_seen = prog.get("last_seen_at") or (row.get("started_at") if parse_ts(row.get("started_at")) else None)
    last = prog.get("last_sample_at")
    return {**row, "stored_status": row["status"], "status": verdict.status, "samples_measured": measured,
            "samples_failed": failed, "coverage": measured / planned if planned else 0.0,
            "last_seen_at": last_seen,
            "liveness": verdict.reason + (f"; last sample at {last}" if last else "; no sample stored")}


def _judged(db, rows: list[dict], here: dict | None, now: datetime | None):
    """(row, verdict or None, progress) per row; rows not stored as running get no verdict."""
    open_ids = [r["id"] for r in rows if r.get("status") == "running"]
    if not open_ids:
        return [(r, None, {}) for r in rows]
    here = here or this_process()
    path = db_file(db)
    prog = _progress(db, open_ids)
    verdicts = {r["id"]: judge(r, db_file=path, last_seen_at=prog.get(r["id"], {}).get("last_seen_at"),
                               here=here, now=now) for r in rows if r.get("status") == "running"}
    # read after the probes: a runner that wrote its end meanwhile has the last word
    cur = db.execute(f"select * from runs where id in ({','.join('?' * len(open_ids))})", open_ids)
    cols = [c[0] for c in cur.description]
    ended = {row["id"]: row for row in (dict(zip(cols, t)) for t in cur.fetchall()) if row["status"] != "running"}
    out = []
    for r in rows:
        if r.get("status") != "running":
            out.append((r, None, {}))
        elif r["id"] in ended:
            out.append(({**r, **ended[r["id"]]}, None, {}))
        else:
            out.append((r, verdicts[r["id"]], prog.get(r["id"], {})))
    return out


def effective_runs(db, rows: list[dict], *, here: dict | None = None, now: datetime | None = None) -> list[dict]:
    """``rows`` as they really stand, read-only.

    A row stored as ``running`` gets its verdict as ``status`` (the stored one
    as ``stored_status``), ``liveness`` (why), ``last_seen_at`` and its
    counts and coverage from the samples it stored so far. Other rows are
    returned unchanged.
    """
    return [r if v is None else _apply(r, v, p) for r, v, p in _judged(db, rows, here, now)]


def reconcile_runs(store, *, by: str, here: dict | None = None) -> list[dict]:
    """Write ``interrupted`` on every run whose process this machine proved gone.

    For write-capable entry points only. ``ended_at`` becomes the last sign
    of life (the moment of death is unknown); the counts are what the run
    stored. A row the runner closed meanwhile is left as the runner wrote it.
    Returns one dict per run written.
    """
    from cardproof.daemon.store import StoreError, utcnow

    db = store.db
    rows = [dict(r) for r in db.query("select * from runs where status = 'running' order by id")]
    done = []
    for row, v, p in _judged(db, rows, here, None):
        if v is None or not v.proven:
            continue
        r = _apply(row, v, p)
        try:
            with db.conn:
                cur = db.execute(
                    "update runs set status = 'interrupted', ended_at = ?, samples_measured = ?, "
                    "samples_failed = ?, coverage = ?, error_text = ? where id = ? and status = 'running'",
                    [r["last_seen_at"], r["samples_measured"], r["samples_failed"], r["coverage"],
                     f"interrupted: {r['liveness']}; found by {by} at {utcnow()}; ended_at is the last "
                     "sign of life, not the moment it stopped", r["id"]])
        except sqlite3.Error as exc:
            raise StoreError(f"{store.path}: cannot mark run {r['id']} interrupted: {exc}") from exc
        if cur.rowcount == 1:
            done.append({"run_id": r["id"], "action": "marked interrupted", "measured": r["samples_measured"],
                         "planned": r["samples_planned"], "why": r["liveness"]})
    _sweep_locks(store)
    return done


def _sweep_locks(store) -> None:
    """Remove lock files nobody holds whose run is no longer running (or that never got a run)."""
    path = Path(os.path.realpath(store.path))
    running = {r[0] for r in store.db.execute("select id from runs where status = 'running'")}
    for f in path.parent.glob(f"{path.name}.run-*.lock"):
        rest = f.name[len(path.name) + len(".run-"):-len(".lock")]
        if rest.isdigit() and int(rest) in running:
            continue
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            f.unlink()
        except OSError:
            pass  # held: a live runner (a fresh lock not yet named, or a run just ending)
        finally:
            os.close(fd)
