"""An incremental build publishes exactly what a build from scratch publishes, after any change.

A seeded sequence of realistic changes to a generated store (bench/report_data.py: real rows in
every table an article reads, synthetic numbers) and to the project's notes; after each one the
project is built incrementally and a new project is built from scratch from the same store and
notes, and every generated file is compared. Every kind of change is made once, in an order the
seed picks (``CARDPROOF_CHANGES_SEED`` picks another one to explore).

What may differ, each named in ``_published``:

- *build records*: files whose name starts with a dot (the manifest, the build gate, the trend and
  table caches, the public copy's record) are what earlier builds saw, by design, and MkDocs leaves
  dot files out of the site: they are not published;
- *the public database's bytes*: ``downloads/cardproof.db`` is brought up to date in place by an
  incremental build and made whole with ``VACUUM INTO`` from scratch; the same rows sit in other
  pages, so it is compared by its schema and rows (``iterdump``), not byte by byte.

Nothing else is normalised: no page carries the time of its build.

Real parts: SQLite files, the real report step (``build`` without ``mkdocs``, whose Markdown is what
it publishes), ``cardproof merge`` through the command line, and a build process killed with
SIGKILL part-way. The index pages hold 3 runs here, not 50, so a handful of runs has month pages.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from cardproof.report import build as build_mod
from cardproof.report.addenda import record_publication
from cardproof.report.build import build

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from report_data import Generator  # noqa: E402

SEED = int(os.environ.get("CARDPROOF_CHANGES_SEED", "20260105"))
INDEX_RUNS, MODEL_RUNS = 3, 2


class World:
    """The store, its generator, the project built incrementally, and the seeded choices."""

    def __init__(self, tmp: Path, rng: random.Random):
        self.tmp, self.rng = tmp, rng
        self.gen = Generator(tmp / "store.db", models=2, campaigns=2, log_lines=40, seed=rng.randrange(1000))
        self.db = self.gen.path
        self.project = tmp / "incremental"

    def write(self, sql: str, args=()) -> None:
        store = open_store(self.db)
        try:
            with store.db.conn:
                store.db.execute(sql, list(args))
        finally:
            store.close()

    def one(self, sql: str, args=()):
        conn = sqlite3.connect(self.db)
        try:
            rows = conn.execute(sql, list(args)).fetchall()
        finally:
            conn.close()
        return self.rng.choice(rows)[0] if rows else None

    def run_id(self, where: str = "1") -> int:
        return self.one(f"select id from runs where {where} order by id")


# -- the changes: each makes one realistic change to the store or the project ------------------------

def no_change(w: World) -> None:
    pass


def gate_flipped(w: World) -> None:
    """A re-judging sets an excluding gate on one sample (or clears it): the sample leaves its median."""
    sid = w.one("select id from samples where kind = 'measure' and run_id = ?", [w.run_id()])
    w.write("update gate_results set fired = 1 - fired where sample_id = ? and gate = 'load_time'", [sid])


def log_line_reattributed(w: World) -> None:
    """A line attributed to another load of its run after the fact (attribution fixed by hand)."""
    line = w.one("select id from log_lines where load_id is not null")
    w.write("update log_lines set load_id = (select min(id) from loads where run_id = log_lines.run_id), "
            "attribution = 'manual' where id = ?", [line])


def log_line_added_late(w: World) -> None:
    """A log imported after the run: one more line for an old run."""
    rid = w.run_id()
    w.write("insert into log_lines (source_id, run_id, ts, raw, attribution) values "
            "((select min(id) from log_sources), ?, '2026-01-01T02:30:00+00:00', 'late: srv slot released', "
            "'unattributed')", [rid])


def run_merged(w: World) -> None:
    """``cardproof merge`` brings a run of another machine's store (same campaigns and models)."""
    other = Generator(w.tmp / f"other-{w.rng.randrange(10**6)}.db", models=2, campaigns=2, log_lines=40,
                      seed=w.rng.randrange(1000))
    other.add(1)
    conn = sqlite3.connect(other.path)
    with conn:
        conn.execute("update runs set host = 'lab-2', started_at = '2026-01-20T03:00:00+00:00', "
                     "ended_at = '2026-01-20T03:35:00+00:00'")
    conn.close()
    result = CliRunner().invoke(cli, ["merge", "--db", str(w.db), str(other.path)])
    assert result.exit_code == 0, result.output


def earlier_month_run(w: World) -> None:
    """A run from an earlier month arrives late: it becomes the first of its campaign."""
    w.gen.add(1)
    rid = w.one("select max(id) from runs")
    w.write("update runs set started_at = '2025-11-20T02:00:00+00:00', ended_at = '2025-11-20T02:35:00+00:00' "
            "where id = ?", [rid])


def status_interrupted(w: World) -> None:
    w.write("update runs set status = 'interrupted', exit_code = 130 where id = ?",
            [w.run_id("status = 'completed'")])


def model_renamed(w: World) -> None:
    w.write("update models set name = name || '~r1' where id = ?", [w.one("select id from models")])


def correction_same_size_and_time(w: World) -> None:
    """Five samples' decode ×1.7, written by a tool that leaves the file's size and time as they were
    (or within the clock tick of the last build): only the store's own record says it changed."""
    before = os.stat(w.db)
    rid = w.run_id()
    store = open_store(w.db)
    try:
        with store.db.conn:
            store.db.execute("update samples set decode_tps = decode_tps * 1.7 where id in "
                             "(select id from samples where run_id = ? and kind = 'measure' order by id limit 5)",
                             [rid])
        store.db.execute("pragma wal_checkpoint(truncate)")
    finally:
        store.close()
    os.utime(w.db, ns=(before.st_atime_ns, before.st_mtime_ns))
    wal = Path(f"{w.db}-wal")
    assert os.stat(w.db).st_size == before.st_size and not (wal.exists() and wal.stat().st_size)


def note_added(w: World) -> None:
    rid = w.run_id()
    folder = w.project / "notes"
    folder.mkdir(exist_ok=True)
    (folder / f"run-{rid}.intro.en.md").write_text("The card was reseated before this run.\n")
    (folder / f"run-{rid}.intro.de.md").write_text("Die Karte wurde vor diesem Lauf neu gesteckt.\n")


def note_edited_in_place(w: World) -> None:
    """A note corrected with the same length and its file time kept (an editor that restores it)."""
    folder = w.project / "notes"
    notes = sorted(folder.glob("run-*.md")) if folder.is_dir() else []
    if not notes:  # a note the last build published first
        note_added(w)
        build(w.db, w.project, run_mkdocs=False)
        notes = sorted(folder.glob("run-*.md"))
    note = w.rng.choice(notes)
    before = os.stat(note)
    text = note.read_text()
    note.write_text(text.replace("a", "e", 1) if "a" in text else "X" + text[1:])
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))


def campaign_edited(w: World) -> None:
    """The frozen campaign edited in the store: a stricter stability limit for every run of it."""
    w.write("update campaigns set toml_text = toml_text || '[report]' || char(10) || 'unstable_ratio = 1.08' "
            "|| char(10), campaign_json = json_set(campaign_json, '$.report.unstable_ratio', 1.08, "
            "'$.unstable_ratio', 1.08) where id = ?", [w.one("select id from campaigns")])


def sample_deleted(w: World) -> None:
    sid = w.one("select id from samples where kind = 'measure' and run_id = ?", [w.run_id()])
    store = open_store(w.db)
    try:
        with store.db.conn:
            store.db.execute("delete from gate_results where sample_id = ?", [sid])
            store.db.execute("delete from samples where id = ?", [sid])
    finally:
        store.close()


def run_deleted(w: World) -> None:
    """A run taken out of the store with every row that depends on it (followed through the foreign keys)."""
    rid = w.run_id()
    conn = sqlite3.connect(w.db)
    try:
        conn.execute("pragma foreign_keys = off")
        with conn:
            conn.execute("delete from runs where id = ?", [rid])
            for (table,) in conn.execute("select name from sqlite_master where type = 'table'").fetchall():
                if "run_id" in {c[1] for c in conn.execute(f'pragma table_info("{table}")')}:
                    conn.execute(f'delete from "{table}" where run_id = ?', [rid])
            while orphans := conn.execute("pragma foreign_key_check").fetchall():
                for table, rowid, *_ in orphans:
                    conn.execute(f'delete from "{table}" where rowid = ?', [rowid])
    finally:
        conn.close()


def replaced_without_recursive_triggers(w: World) -> None:
    """A correction written with ``insert or replace`` from a plain connection (the sqlite3 shell's
    default: recursive triggers off, so the row it deletes fires no delete trigger): one sample's decode."""
    sid = w.one("select id from samples where kind = 'measure' and run_id = ?", [w.run_id()])
    conn = sqlite3.connect(w.db)
    try:
        conn.execute("pragma recursive_triggers = off")
        cols = [r[1] for r in conn.execute("pragma table_info(samples)")]
        row = dict(zip(cols, conn.execute("select * from samples where id = ?", [sid]).fetchone()))
        row["decode_tps"] = (row["decode_tps"] or 0) * 0.61 + 1
        with conn:
            conn.execute(f"insert or replace into samples ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                         list(row.values()))
    finally:
        conn.close()


def restored_then_edited(w: World) -> None:
    """A backup restored over the store, then one correction: the same count of changed rows another
    correction reached after the backup, which the last build published (its salt is another)."""
    backup = w.tmp / f"backup-{w.rng.randrange(10**6)}.db"
    src = sqlite3.connect(w.db)
    try:
        src.execute("vacuum into ?", [str(backup)])
    finally:
        src.close()
    sid = w.one("select id from samples where kind = 'measure' and run_id = ?", [w.run_id()])
    w.write("update samples set decode_tps = decode_tps * 1.9 where id = ?", [sid])
    build(w.db, w.project, run_mkdocs=False)
    conn = sqlite3.connect(w.db)
    try:
        old = sqlite3.connect(backup)
        try:
            old.backup(conn)
        finally:
            old.close()
        with conn:
            conn.execute("update samples set decode_tps = decode_tps * 0.4 where id = ?", [sid])
    finally:
        conn.close()


def observed_request_deleted(w: World) -> None:
    """An observed request taken out of the store (a log import redone by hand)."""
    oid = w.one("select id from observed_requests where run_id = ?", [w.run_id()])
    w.write("delete from observed_requests where id = ?", [oid])


def publication(w: World) -> None:
    """``cardproof publish`` records what the articles state; later changes then show as Addenda."""
    store = open_store(w.db)
    try:
        record_publication(store.db, note="seeded publication")
    finally:
        store.close()


_KILLED_BUILD = """
import os, signal, sys
from pathlib import Path
from cardproof.report import build as b

b.INDEX_RUNS, b.MODEL_RUNS = int(sys.argv[4]), int(sys.argv[5])
real, writes = b._write_if_changed, [0]

def write(path, text):
    changed = real(path, text)
    writes[0] += 1
    if writes[0] >= int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)  # no finally block, no manifest, no gate: as a kill -9 leaves it
    return changed

b._write_if_changed = write
b.build(Path(sys.argv[1]), Path(sys.argv[2]), run_mkdocs=False)
"""


def build_killed(w: World) -> None:
    """A new run and a re-judged old one, and the build that would publish them killed after a few pages."""
    w.gen.add(1)
    gate_flipped(w)
    after = w.rng.randint(1, 6)
    proc = subprocess.run([sys.executable, "-c", _KILLED_BUILD, str(w.db), str(w.project), str(after),
                           str(INDEX_RUNS), str(MODEL_RUNS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])


#: every kind of change the incremental build must follow (issue: point 5), by name
CHANGES = {f.__name__: f for f in (
    no_change, gate_flipped, log_line_reattributed, log_line_added_late, run_merged, earlier_month_run,
    status_interrupted, model_renamed, correction_same_size_and_time, note_added, note_edited_in_place,
    campaign_edited, sample_deleted, run_deleted, build_killed, publication, replaced_without_recursive_triggers,
    restored_then_edited, observed_request_deleted)}


# -- the comparison ---------------------------------------------------------------------------------

def _published(project: Path) -> dict[str, object]:
    """Every generated file of the project by its path, as compared; the normalisations are named here."""
    out: dict[str, object] = {}
    for path in sorted(project.rglob("*")):
        rel = path.relative_to(project)
        if not path.is_file() or rel.parts[0] == "notes":  # notes: the author's input, copied as they are
            continue
        if any(part.startswith(".") for part in rel.parts):
            continue  # normalisation "build records": not published (MkDocs leaves dot files out)
        if rel.as_posix() == "site/downloads/cardproof.db":
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:  # normalisation "the public database's bytes": compared by schema and rows
                out[rel.as_posix()] = "\n".join(conn.iterdump())
            finally:
                conn.close()
            continue
        out[rel.as_posix()] = path.read_bytes()
    return out


def _differences(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


@pytest.fixture
def small_index(monkeypatch):
    monkeypatch.setattr(build_mod, "INDEX_RUNS", INDEX_RUNS)
    monkeypatch.setattr(build_mod, "MODEL_RUNS", MODEL_RUNS)


def test_every_kind_of_change_is_made():
    named = {"no_change", "gate_flipped", "log_line_reattributed", "log_line_added_late", "run_merged",
             "earlier_month_run", "status_interrupted", "model_renamed", "correction_same_size_and_time",
             "note_added", "note_edited_in_place", "campaign_edited", "sample_deleted", "run_deleted",
             "build_killed", "publication", "replaced_without_recursive_triggers", "restored_then_edited",
             "observed_request_deleted"}
    assert set(CHANGES) == named


def test_an_incremental_build_publishes_what_a_build_from_scratch_publishes(tmp_path, small_index):
    rng = random.Random(SEED)
    w = World(tmp_path, rng)
    w.gen.add(3)  # runs 1 and 3 of campaign A (compared), run 2 of campaign B
    build(w.db, w.project, run_mkdocs=False)
    order = list(CHANGES)
    rng.shuffle(order)
    failed = []
    for step, name in enumerate(order, 1):
        try:
            CHANGES[name](w)
        except Exception as exc:
            raise AssertionError(f"step {step}: the change {name} could not be made") from exc
        build(w.db, w.project, run_mkdocs=False)
        scratch = tmp_path / f"scratch-{step}"
        if (w.project / "notes").is_dir():
            shutil.copytree(w.project / "notes", scratch / "notes")
        build(w.db, scratch, run_mkdocs=False)
        diff = _differences(_published(w.project), _published(scratch))
        if diff:
            failed.append(f"step {step}, {name}: {len(diff)} files differ, e.g. {diff[:6]}")
        shutil.rmtree(scratch)
    assert not failed, f"seed {SEED}, order {order}:\n" + "\n".join(failed)
