"""Incremental builds: a fingerprint of everything a page is made from.

The manifest beside the articles (``site/.cardproof-build.json``) maps each
page key (``run-12``, ``run-12-vs-11``) to the fingerprint it was rendered
from (``pages``); a page whose fingerprint is unchanged and whose files exist
is not rendered again. It also keeps each run's and comparison's summary
(``runs``, ``comparisons``, see report/summaries.py) for the cross-run pages.

In short, ``fingerprints.py``, ``summaries.py``: the build manifest
(``site/.cardproof-build.json``: a JSON line of page fingerprints and comparison summaries, then a
line per run summary with its digest; an unchanged summary is written back as the text it was read
as, and its line is not held: ``StoredLine`` keeps where it is and reads it again, digest checked,
when its cells or text are needed; a line that is not whole means the run is read again; per-table
counts in ``site/.cardproof-table-stats.json``: per run its rows' count, highest and lowest rowid,
for every table a run's rows sit in, read from the schema by ``row_owners.py`` (a ``run_id`` column,
or a reference followed to a table that has one: ``gate_results`` by their sample, ``facts`` by
their load; rows shared by use: models, campaigns, registrations; tables every run page may read:
their content, in the columns the pages print; tables no run page reads, each named with its reason
in ``NOT_ON_RUN_PAGES``), so a table a migration adds is followed without being named
(``tests/test_incremental_every_table.py`` writes every table of the schema four ways: update,
insert or replace, delete, a backup restored and edited); a table that only gained rows has only the
new rows grouped by run; a table whose triggers were dropped is digested by content per run; a run's
fingerprint also takes the store's record of writes (counts and salts) in the buckets its rows' ids
span, so a row changed in place (a sample's counters from the log, a line attributed later) renders
its run again, with the runs whose rows share the bucket; and the rows it shares with other runs
that its pages print (``_shared_rows``: its models', its campaign's frozen text, its registration),
so a model renamed in the store or an edited campaign renders the runs that use it, and a new model
or campaign none) and the cross-run figures (headline, cell medians, ratio ranges up to each run, so
a later run never rewrites a published article)
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import os
import sqlite3
import time
from importlib import metadata, resources
from pathlib import Path

from cardproof.daemon.store.migrations import ROW_CHANGE_BITS, salted_tables

from .row_owners import EVERYWHERE_COLUMNS, Owned, everywhere, owners, quote

MANIFEST = ".cardproof-build.json"

# What the articles are made with besides the data.
_CODE_SUFFIXES = (".py", ".j2", ".po", ".pot", ".toml")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Templates, catalogues, code and the package version: a change to any re-renders everything.

    Covers the report package (templates, message catalogues, Python), the
    capture-side modules the report reads texts and rules from (gate
    descriptions, probe defects, campaign checks) and the installed version.
    Paths are hashed relative to their package, so two files of one name in
    different folders do not collide.
    """
    h = hashlib.sha256()
    try:
        h.update(metadata.version("cardproof").encode())
    except metadata.PackageNotFoundError:  # run from a source tree without installing
        h.update(b"unversioned")
    for package in ("cardproof.report", "cardproof.daemon"):
        root = Path(str(resources.files(package)))
        for p in sorted(root.rglob("*")):
            if p.suffix in _CODE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts:
                h.update(f"{package}/{p.relative_to(root).as_posix()}\0".encode())
                h.update(p.read_bytes())
                h.update(b"\0")
    return h.hexdigest()


TABLE_STATS = ".cardproof-table-stats.json"


def _salts(db) -> dict[str, list]:
    """The store's record of its writes (``row_changes``: per table and bucket of 4,096 rowids, rows
    updated, deleted or replaced, and the salt the last of them left), by table, in bucket order."""
    out: dict[str, list] = {}
    if "row_changes" not in db.table_names():
        return out
    cols = {r[1] for r in db.execute("pragma table_info(row_changes)").fetchall()}
    salt = "salt" if "salt" in cols else "null"
    for tbl, bucket, n, s in db.execute(f"select tbl, bucket, n, {salt} from row_changes order by tbl, bucket"):
        out.setdefault(str(tbl), []).append([bucket, n, s])
    return out


def _digest(items) -> str:
    return hashlib.sha256(json.dumps(items, separators=(",", ":"), default=str).encode()).hexdigest()[:32]


def _content_per_run(db, owned: Owned) -> dict[int, list]:
    """Per run, a digest of the content of every row of ``owned``'s table it owns: for a table whose
    writes the store does not record (its triggers dropped), the only way to see a row changed in place."""
    cols = [r[1] for r in db.execute(f"pragma table_info({quote(owned.table)})").fetchall()]
    row = "||char(31)||".join(f"quote({{t}}.{quote(c)})" for c in cols) or "''"
    out = {}
    for rid, text, n in db.execute(owned.per_run(f"group_concat({row}, char(30)), count(*)")).fetchall():
        out[rid] = ["content", n, hashlib.sha256(str(text).encode()).hexdigest()[:32]]
    return out


def _appended_only(db, owned: Owned, before, now: list) -> bool:
    """True when the table only gained rows since ``before`` ([signature of its recorded writes, highest
    rowid, row count]): no row was updated, deleted or replaced (the same signature) and the rows above
    the old highest rowid are exactly the new ones."""
    if not (isinstance(before, list) and len(before) == 3 and before[0] == now[0]):
        return False
    if before[1] is None:
        return True
    if not isinstance(before[1], int) or not isinstance(before[2], int) or now[1] is None or now[1] < before[1]:
        return False
    added = db.execute(f"select count(*) from {quote(owned.table)} where rowid > ?", [before[1]]).fetchone()[0]
    return added == now[2] - before[2]


def _merged(runs: dict, added: list) -> dict:
    """Per-run [count, highest rowid, lowest rowid] with the rows added since folded in."""
    out = dict(runs)
    for row in added:
        key, figures = str(row[0]), list(row[1:])
        old = out.get(key)
        if not isinstance(old, list) or len(old) != 3 or not all(isinstance(v, int) for v in old):
            out[key] = figures
            continue
        out[key] = [old[0] + figures[0], max(old[1], figures[1]), min(old[2], figures[2])]
    return out


def _touched(salts: dict[str, list], stats: dict[str, dict[int, list]]) -> dict[str, dict[int, str]]:
    """Per table and run: the record of writes (``row_changes``) in the buckets of rowids its rows span.
    A row changed in place leaves a run's count and highest rowid as they were (a log line attributed
    to a load, a sample's counters from the log, a row replaced): this moves instead, so the run's
    pages are made again; runs whose rows share the bucket are made again with it (harmless)."""
    out: dict[str, dict[int, str]] = {}
    for name, rows in salts.items():
        if name not in stats:
            continue
        buckets = [b for b, _, _ in rows]
        per_run = {}
        for rid, figures in stats[name].items():
            if len(figures) != 3 or not all(isinstance(v, int) for v in figures):
                continue
            lo, hi = figures[2], figures[1]
            first = bisect.bisect_left(buckets, lo >> ROW_CHANGE_BITS)
            last = bisect.bisect_right(buckets, hi >> ROW_CHANGE_BITS)
            if last > first:
                per_run[rid] = _digest(rows[first:last])
        out[name] = per_run
    return out


_STATS_LAYOUT = 3


def _per_run_stats(db, cache_path: Path | None, salts: dict[str, list]) -> dict[str, dict[int, list]]:
    """Per owned table (report/row_owners.py) and run id: [count, highest rowid, lowest rowid].

    A table's whole figures (the signature of its recorded writes, highest rowid, count) are cheap;
    only a table whose whole figures changed since the last build (kept in ``cache_path``) is grouped
    by run again, and one that only gained rows (a new run) has only those rows grouped and folded
    into the kept figures. A table whose writes the store does not record is read whole, its rows'
    content digested per run, on every build.
    """
    try:
        cached = json.loads(cache_path.read_text()) if cache_path else {}
    except (OSError, ValueError):
        cached = {}
    cached = cached if isinstance(cached, dict) and cached.get("_layout") == _STATS_LAYOUT else {}
    salted = salted_tables(db.conn)
    out, keep = {}, {"_layout": _STATS_LAYOUT}
    for name, owned in sorted(owners(db.conn).items()):
        if name not in salted:
            out[name] = _content_per_run(db, owned)
            continue
        t = quote(name)
        top, count = db.execute(f"select (select max(rowid) from {t}), (select count(*) from {t})").fetchone()
        whole = [_digest(salts.get(name, [])), top, count]
        seen = cached.get(name) if isinstance(cached.get(name), dict) else {}
        before, kept = seen.get("whole"), seen.get("runs") if isinstance(seen.get("runs"), dict) else None
        runs = kept if before == whole else None
        if runs is None and kept is not None and _appended_only(db, owned, before, whole):
            added = db.execute(owned.per_run("count(*), max({t}.rowid), min({t}.rowid)", "where {t}.rowid > ?"),
                               [before[1]]).fetchall() if before[1] is not None else []
            runs = _merged(kept, added)
        if runs is None:
            runs = {str(row[0]): list(row[1:]) for row in db.execute(
                owned.per_run("count(*), max({t}.rowid), min({t}.rowid)")).fetchall()}
        out[name] = {int(k): v for k, v in runs.items() if str(k).lstrip("-").isdigit()}
        keep[name] = {"whole": whole, "runs": runs}
    if cache_path:
        try:
            cache_path.write_text(json.dumps(keep))
        except OSError:
            pass  # only a shortcut for the next build
    return out


def run_fingerprints(db, runs: list[dict], project: Path, code: str) -> dict[int, str]:
    """Per run id, a summary of everything its pages are made from.

    Every table a run's rows sit in (report/row_owners.py, read from the schema): per run its rows'
    count and rowid span, and the store's record of writes in that span (every update, delete and
    replaced row moves it, whatever wrote it); the run's own row; the rows it shares with other runs
    (``_shared_rows``) and those every run's pages read; the author's notes and ``code``.
    """
    site = Path(project) / "site"
    salts = _salts(db)
    stats = _per_run_stats(db, site / TABLE_STATS if site.is_dir() else None, salts)
    touched = _touched(salts, stats)
    shared = _shared_rows(db, runs)
    common = _everywhere_rows(db)
    own_rows = _rows_by_id(db, "runs")
    notes = _notes_by_run(project)
    out = {}
    for r in runs:
        h = hashlib.sha256(code.encode())
        h.update(json.dumps(r, sort_keys=True, default=str).encode())
        h.update(own_rows.get(r["id"], "").encode())
        h.update(shared.get(r["id"], "").encode())
        h.update(common.encode())
        for name in sorted(stats):
            h.update(f"{name}:{stats[name].get(r['id'])};".encode())
            if name in touched:
                h.update(f"changed:{touched[name].get(r['id'], '')};".encode())
        for note in notes.get(r["id"], []):
            h.update(note.name.encode())
            h.update(note.read_bytes())
        out[r["id"]] = h.hexdigest()
    return out


def _everywhere_rows(db) -> str:
    """One digest of the tables every run's pages may read (``row_owners.everywhere``): their content, in
    the columns the pages print (``EVERYWHERE_COLUMNS``). Small tables: a publication, a capture gap."""
    h = hashlib.sha256()
    for table in everywhere(db.conn):
        cols = EVERYWHERE_COLUMNS.get(table)
        sel = ", ".join(quote(c) for c in cols) if cols else "*"
        h.update(f"{table}\0".encode())
        for row in db.execute(f"select {sel} from {quote(table)} order by rowid"):
            h.update(repr(tuple(row)).encode())
    return h.hexdigest()


def _rows_by_id(db, table: str) -> dict:
    """Each row of a small shared table as JSON text, by id (none where the table is missing)."""
    if table not in db.table_names():
        return {}
    return {row["id"]: json.dumps(row, sort_keys=True, default=str) for row in db.query(f"select * from {table}")}


def _shared_rows(db, runs: list[dict]) -> dict[int, str]:
    """Per run id, a digest of the rows its pages print that belong to no run: its models' rows, its
    campaign's (the frozen text whose ``[report]`` limits judge every cell) and its registration.

    A model renamed in the store changes none of a run's own rows: every page that names it (the run's
    articles, their comparisons, the trend pages keyed by runs' fingerprints) kept the old name. Only
    the rows a run uses are taken, so a new model or campaign renders no older run again. The tables
    are small (a model or campaign per row); which models a run uses is one pass over cells and loads.
    """
    models, campaigns = _rows_by_id(db, "models"), _rows_by_id(db, "campaigns")
    registrations = _rows_by_id(db, "registrations")
    by_hash: dict[str, list[str]] = {}
    for text in registrations.values():  # a run without a linked registration shows the earliest of its text
        by_hash.setdefault(str(json.loads(text).get("sha256")), []).append(text)
    used: dict[int, set] = {}
    for table in ("cells", "loads"):
        if table in db.table_names():
            for rid, mid in db.execute(f"select distinct run_id, model_id from {table}").fetchall():
                used.setdefault(rid, set()).add(mid)
    out = {}
    for r in runs:
        parts = [campaigns.get(r.get("campaign_id"), "")]
        parts += [models.get(mid, "") for mid in sorted(used.get(r["id"], ()), key=str)]
        if r.get("registration_id") is not None:
            parts.append(registrations.get(r["registration_id"], ""))
        parts += sorted(by_hash.get(str(r.get("campaign_sha256")), []))
        out[r["id"]] = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return out


def _notes_by_run(project: Path) -> dict[int, list[Path]]:
    """The author's notes (``notes/run-N.*``) by run id, read from one folder listing."""
    folder = Path(project) / "notes"
    out: dict[int, list[Path]] = {}
    if not folder.is_dir():
        return out
    for p in sorted(folder.glob("run-*.*")):
        head = p.name.split(".", 1)[0].removeprefix("run-")
        if head.isdigit():
            out.setdefault(int(head), []).append(p)
    return out


def combine(*parts: str) -> str:
    """One fingerprint from several."""
    return hashlib.sha256("".join(parts).encode()).hexdigest()


#: the manifest's first line; the second is JSON (``pages``, ``comparisons``), then a line per run summary
#: (``RunSummary.to_line``): a summary that did not change is written back as the text it was read as,
#: and read lazily (at a year of runs the summaries are megabytes; JSON of all of them cost 0.6 s a build)
_MANIFEST_HEAD = "cardproof manifest 2"


class StoredLine:
    """A run summary's line in the manifest file, read again from the file when needed: a year of
    summaries is megabytes, and a build reads few of them whole (``RunSummary.from_line``)."""

    __slots__ = ("path", "offset", "length")

    def __init__(self, path: Path, offset: int, length: int):
        self.path, self.offset, self.length = path, offset, length

    def text(self) -> str:
        """The line as read at the start of the build; ValueError where the file no longer holds it."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                raw = f.read(self.length)
        except OSError as exc:
            raise ValueError(f"the manifest {self.path} could not be read again: {exc}") from exc
        if len(raw) != self.length or b"\n" in raw:
            raise ValueError(f"the manifest {self.path} changed during the build")
        return raw.decode("utf-8")


def read_manifest(path: Path) -> dict:
    """The last build's ``pages`` (key -> fingerprint), ``runs`` (run id as text -> its summary's line,
    a ``StoredLine``, or its JSON in a manifest of the older layout) and ``comparisons`` (summaries).

    A missing, unreadable or older manifest reads as empty parts: everything is built again.
    Read line by line, and the runs' lines are not held (only where each is in the file);
    ``_digest`` is the text's digest, so ``write_manifest`` can tell an unchanged manifest.
    """
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as f:
            first = f.readline()
            digest.update(first)
            if first == (_MANIFEST_HEAD + "\n").encode():
                second = f.readline()
                digest.update(second)
                try:
                    data = json.loads(second)
                except ValueError:
                    data = {}
                data = data if isinstance(data, dict) else {}
                runs = {}
                offset = len(first) + len(second)
                for raw in f:
                    digest.update(raw)
                    head = raw[:24].split(b"\t", 1)
                    if len(head) == 2:  # a run id, then the rest of the line (read again when needed)
                        runs[head[0].decode("utf-8", "replace")] = StoredLine(Path(path), offset,
                                                                              len(raw.rstrip(b"\n")))
                    offset += len(raw)
                out = {part: data[part] if isinstance(data.get(part), dict) else {} for part in ("pages", "comparisons")}
                return out | {"runs": runs, "_digest": digest.hexdigest()}
            text = (first + f.read()).decode("utf-8")
    except (OSError, ValueError):
        text = ""
    try:
        data = json.loads(text)
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    return {part: data[part] if isinstance(data.get(part), dict) else {}
            for part in ("pages", "runs", "comparisons")}


def write_manifest(path: Path, keys: dict, old: dict | None = None) -> None:
    """Write the manifest (``pages``, ``comparisons``, and ``runs``: run id -> ``RunSummary``) unless it
    is the text read at the start (``old``, by its digest). Written line by line, not made whole first."""
    head = json.dumps({part: keys.get(part) or {} for part in ("pages", "comparisons")}, separators=(",", ":"),
                      sort_keys=True)
    runs = keys.get("runs") or {}
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    digest = hashlib.sha256()
    with tmp.open("w", encoding="utf-8", newline="") as f:
        for line in [_MANIFEST_HEAD, head]:
            digest.update((line + "\n").encode())
            f.write(line + "\n")
        for rid in sorted(runs, key=int):
            line = runs[rid].to_line() + "\n"
            digest.update(line.encode())
            f.write(line)
    if old is not None and old.get("_digest") == digest.hexdigest() and Path(path).exists():
        tmp.unlink()
        return
    os.replace(tmp, path)


GATE = ".cardproof-build-gate.json"


def _folder_state(folder: Path) -> str:
    """One digest of a folder's entries (name, size, file time): any page written, removed or added changes it."""
    h = hashlib.sha256()
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return "missing"
    for e in entries:
        if e.name.startswith("."):
            continue  # the build's own records (manifest, caches, this gate) are not pages
        try:
            if e.is_dir():
                continue  # a folder's time changes with what is written into it; its pages are looked at apart
            st = e.stat()
        except OSError:
            continue
        h.update(f"{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def _file_state(path: Path) -> list | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def build_gate(db_path: Path, project: Path, code: str) -> dict:
    """What a whole build is made from, read cheaply: the store's own record of its changes, the code,
    the author's notes, the pages written and the manifest.

    Equal to the last build's record: nothing can have changed, and a build that changes nothing
    need not read the store's rows at all (a no-op rebuild at a year of runs in under 2 s).
    A run stored as ``running`` is judged by its process and the clock (daemon/store/liveness.py), which no
    record of the store follows: while there is one, the gate never holds.
    """
    state, live = _store_record(db_path)
    return {"db": state, "code": code, "notes": _notes_state(Path(project) / "notes"),
            "live": time.time_ns() if live else None} | pages_state(project)


def store_state(db_path: Path) -> list:
    """The store as its own record of writes has it: per table the highest rowid and the record of rows
    updated, deleted or replaced (``row_changes``: counts and the salt each write leaves, kept by the
    triggers of daemon/store/migrations.py ``follow_rows``), and the schema's version.

    Not the files' size and time: a correction that keeps the database's size, written within the
    clock tick of the last build or by a tool that restores the file time, changed neither, and the
    articles kept the old figures. Not counts alone: a store restored from a backup and edited once
    reaches the count another edit reached. Rows added take new rowids; every other write leaves a
    fresh salt. A table the triggers do not follow is read whole (``_uncounted``) where it is small; a big
    one, or a store that cannot be read, gives a state no other read equals, so nothing is skipped on
    its account.
    """
    return _store_record(db_path)[0]


def _store_record(db_path: Path) -> tuple[list, bool]:
    """``store_state`` and whether any run is stored as ``running``, from one read-only connection."""
    from cardproof.daemon.store.file import connect_leaving_nothing

    db_path = Path(db_path)
    where = str(db_path.resolve())
    try:
        # the gate reads before the store is opened and judged ours: a file that is not ours must be
        # left exactly as it was, with no -wal or -shm beside it
        conn = connect_leaving_nothing(db_path, timeout=5.0)
    except (sqlite3.Error, OSError):
        return [where, "unreadable", time.time_ns()], False
    try:
        salted = salted_tables(conn)
        changes: dict[str, list] = {}
        if salted:
            for tbl, bucket, n, salt in conn.execute("select tbl, bucket, n, salt from row_changes order by tbl, bucket"):
                changes.setdefault(tbl, []).append([bucket, n, salt])
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' "
                                             "and name not like 'sqlite_%' and name != 'row_changes' order by name")]
        out = [where, conn.execute("pragma schema_version").fetchone()[0]]
        for t in tables:
            q = '"' + t.replace('"', '""') + '"'
            try:
                top = conn.execute(f"select max(rowid) from {q}").fetchone()[0]
            except sqlite3.Error:  # a table without rowids: its rows' digest is all there is
                top = None
            out.append([t, top, _digest(changes.get(t, [])) if t in salted else _uncounted(conn, q, top)])
        live = "runs" in tables and conn.execute(
            "select exists (select 1 from runs where status = 'running')").fetchone()[0] == 1
        return out, live
    except sqlite3.Error:
        return [where, "unreadable", time.time_ns()], False
    finally:
        conn.close()


#: an uncounted table of at most this many rows is read whole into the store's state; a bigger one cannot
#: be followed cheaply, and makes a state no other read equals
_DIGEST_ROWS = 20_000


def _uncounted(conn, q: str, top) -> list:
    """The state of a table the triggers do not count (``_sqlite_migrations``; a table a later migration
    added without m022's triggers; a store whose triggers were dropped): its rows' digest, since neither
    its highest rowid nor its count sees a row changed in place."""
    n = conn.execute(f"select count(*) from {q}").fetchone()[0]
    if n > _DIGEST_ROWS:
        return ["rows", n, "not followed", time.time_ns()]
    h = hashlib.sha256()
    order = " order by rowid" if top is not None else ""
    for row in conn.execute(f"select * from {q}{order}"):
        h.update(repr(row).encode())
    return ["rows", n, h.hexdigest()]


def _notes_state(folder: Path) -> str:
    """One digest of the author's notes, by their text: a note is a few lines, read whole each build, so
    an edit that keeps its size and file time is seen too."""
    h = hashlib.sha256()
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return "missing"
    for e in entries:
        try:
            if e.is_file():
                h.update(f"{e.name}\0".encode() + Path(e.path).read_bytes() + b"\0")
        except OSError:
            h.update(f"{e.name}\0unreadable\0".encode())
    return h.hexdigest()


def pages_state(project: Path) -> dict:
    """The site folder's pages as the build left them: each folder's entries one level down, and the manifest."""
    site = Path(project) / "site"
    out = {"site": _folder_state(site), "manifest": _file_state(site / MANIFEST)}
    try:
        # downloads/ is the public database's, which has a record of its own (report/exports.py)
        folders = sorted(e.name for e in os.scandir(site) if e.is_dir() and not e.name.startswith(".")
                         and e.name != "downloads")
    except OSError:
        folders = []
    for name in folders:
        out[f"site/{name}"] = _folder_state(site / name)
    return out


def read_gate(project: Path) -> dict | None:
    try:
        data = json.loads((Path(project) / "site" / GATE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_gate(project: Path, gate: dict) -> None:
    try:
        (Path(project) / "site" / GATE).write_text(json.dumps(gate))
    except OSError:
        pass  # only a shortcut for the next build
