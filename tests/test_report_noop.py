"""A rebuild that changes nothing reads no store; a full build writes each article once.

Real SQLite databases from bench/report_data.py's generator (synthetic
numbers, real rows in every table an article reads), the real report step
(``write_articles``, ``build`` without mkdocs) and the real files it writes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cardproof.report import build as build_mod
from cardproof.report import exports
from cardproof.report.build import build, scaffold, write_articles


def _generator_module():
    spec = importlib.util.spec_from_file_location(
        "report_data_bench", Path(__file__).resolve().parent.parent / "bench" / "report_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def gen(tmp_path):
    return _generator_module().Generator(tmp_path / "nightly.db", models=2, campaigns=2, log_lines=200)


@pytest.fixture
def opened(monkeypatch):
    """How often the report step opened the store."""
    count = []
    real = build_mod.open_store

    def open_store(*a, **k):
        count.append(1)
        return real(*a, **k)

    monkeypatch.setattr(build_mod, "open_store", open_store)
    return count


def _pages(project: Path) -> dict[str, str]:
    site = project / "site"
    return {str(p.relative_to(site)): p.read_text() for d in ("runs", "compare") for p in (site / d).glob("*.*")}


def test_a_rebuild_with_nothing_changed_does_not_open_the_store(gen, tmp_path, opened):
    gen.add(3)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    assert opened == [1]
    assert write_articles(gen.path, project) == []
    assert opened == [1]


def test_a_new_run_a_removed_page_or_a_new_note_is_built_after_a_no_op(gen, tmp_path, opened):
    gen.add(3)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    write_articles(gen.path, project)
    good = _pages(project)
    (project / "site" / "runs" / "run-2.de.md").unlink()
    write_articles(gen.path, project)
    assert _pages(project) == good
    (project / "notes").mkdir()
    (project / "notes" / "run-2.intro.en.md").write_text("The card was swapped before this run.\n")
    written = write_articles(gen.path, project)
    assert project / "site" / "runs" / "run-2.md" in written
    assert "The card was swapped" in (project / "site" / "runs" / "run-2.md").read_text()
    gen.add(1)
    written = write_articles(gen.path, project)
    assert project / "site" / "runs" / "run-4.md" in written


def test_a_damaged_gate_record_means_a_normal_build(gen, tmp_path):
    gen.add(2)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    good = _pages(project)
    (project / "site" / ".cardproof-build-gate.json").write_text("{not json")
    assert write_articles(gen.path, project) == []  # read the store, found every page fresh
    assert _pages(project) == good


def test_a_full_build_writes_each_article_once(gen, tmp_path, monkeypatch):
    """Downloads, addenda and the feed's date are in the article as first written, not patched in after."""
    gen.add(2)
    writes: list[Path] = []
    real = Path.write_text

    def write_text(self, *a, **k):
        writes.append(self)
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    project = tmp_path / "proj"
    build(gen.path, project, run_mkdocs=False)
    runs = project / "site" / "runs"
    articles = [p for p in writes if p.parent == runs and p.name.startswith("run-") and p.suffix == ".md"]
    assert articles and len(articles) == len(set(articles)), sorted(map(str, articles))
    en = (runs / "run-1.md").read_text()
    assert en.startswith("---\n") and "\ndate: \"" in en.split("\n---\n", 1)[0]
    assert en.count("{#downloads}") == 0 and (runs / "run-1-evidence.md").read_text().count("{#downloads}") == 1


def test_the_public_database_is_made_again_only_when_the_store_changed(gen, tmp_path, monkeypatch):
    gen.add(2)
    project = tmp_path / "proj"
    build(gen.path, project, run_mkdocs=False)
    made = []
    real = exports.public_database

    def public_database(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(exports, "public_database", public_database)
    build(gen.path, project, run_mkdocs=False)
    assert made == []
    gen.add(1)
    build(gen.path, project, run_mkdocs=False)
    assert made == [1]
    assert (project / "site" / "runs" / "run-3-samples.csv").is_file()


def test_a_whole_build_after_another_reader_changes_nothing(gen, tmp_path, monkeypatch, opened):
    """Another reader opening the store (its empty WAL made and removed) and the public database written
    by the build itself are no change: the next build opens nothing and copies nothing."""
    import sqlite3

    gen.add(2)
    project = tmp_path / "proj"
    build(gen.path, project, run_mkdocs=False)
    assert (project / "site" / "downloads" / "cardproof.db").is_file()
    made = []
    monkeypatch.setattr(exports, "public_database", lambda *a, **k: made.append(1))
    for _ in range(2):
        conn = sqlite3.connect(gen.path)
        conn.execute("select count(*) from runs").fetchone()
        conn.close()
        build(gen.path, project, run_mkdocs=False)
    assert opened == [1] and made == []


def test_a_correction_that_keeps_the_files_size_and_time_is_built(gen, tmp_path, opened):
    """The gate reads the store's own record of changes, not its files: five samples corrected by a tool
    that leaves the database's size and file time as they were (or within the clock tick of the last
    build) are built, where the files' size and time said nothing had changed."""
    import os

    from cardproof.daemon.store import open_store

    gen.add(2)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    before = os.stat(gen.path)
    store = open_store(gen.path)
    with store.db.conn:
        store.db.execute("update samples set decode_tps = decode_tps * 1.7 where id in "
                         "(select id from samples where run_id = 2 and kind = 'measure' order by id limit 5)")
    store.db.execute("pragma wal_checkpoint(truncate)")
    store.close()
    os.utime(gen.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(gen.path).st_size == before.st_size
    written = {p.name for p in write_articles(gen.path, project)}
    assert opened == [1, 1] and {"run-2.md", "run-2.de.md"} <= written


def test_a_run_stored_as_running_is_looked_at_by_every_build(gen, tmp_path, opened):
    """Whether a run stored as running still runs is its process's and the clock's to say
    (daemon/store/liveness.py), which no record of the store follows: the gate never holds while there is one."""
    from cardproof.daemon.store import open_store

    gen.add(2)
    store = open_store(gen.path)
    with store.db.conn:
        store.db.execute("update runs set status = 'running' where id = 2")
    store.close()
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    write_articles(gen.path, project)
    assert opened == [1, 1]
