"""The report step after one new run: only that run is read and rendered.

Real SQLite databases from bench/report_data.py's generator (synthetic
numbers, real rows in every table an article reads: log lines, facts,
probes, gates), and the real report step. An incremental build must give
the same pages as a build from scratch.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from cardproof.daemon.store import open_store
from cardproof.report import build as build_mod
from cardproof.report import queries
from cardproof.report.build import scaffold, write_articles
from cardproof.report.compare import previous_run
from cardproof.report.fingerprints import MANIFEST
from cardproof.report.summaries import previous_runs


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
def counted_views(monkeypatch):
    """Which runs the report step built a full view of."""
    seen = []
    real = queries.run_view

    def run_view(db, run_id):
        seen.append(run_id)
        return real(db, run_id)

    monkeypatch.setattr(queries, "run_view", run_view)
    return seen


def _pages(project: Path) -> dict[str, str]:
    site = project / "site"
    return {str(p.relative_to(site)): p.read_text() for d in ("runs", "compare") for p in (site / d).glob("*.md")}


def _ours(written: list[Path], project: Path) -> set[str]:
    """The written files that are run articles, evidence pages, comparisons or the runs index."""
    site = project / "site"
    return {str(p.relative_to(site)) for p in written if p.parent.name in ("runs", "compare")}


def test_nothing_changed_reads_no_run_and_writes_no_page(gen, tmp_path, counted_views):
    gen.add(4)
    project = tmp_path / "proj"
    scaffold(project)
    first = write_articles(gen.path, project)
    # articles+evidence, samples CSV+JSON, 2 comparisons, index
    assert len(_ours(first, project)) == 4 * 4 + 4 * 2 + 2 * 2 + 2
    counted_views.clear()
    again = write_articles(gen.path, project)
    assert counted_views == []
    assert _ours(again, project) == set()
    assert not any(p.name.startswith("index") and p.parent == project / "site" for p in again)  # home page


def test_one_new_run_renders_that_run_its_comparison_and_the_index(gen, tmp_path, counted_views):
    gen.add(4)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    before = _pages(project)
    counted_views.clear()
    gen.add(1)  # run 5: campaign of run 3, compared with it
    written = write_articles(gen.path, project)
    assert sorted(set(counted_views)) == [3, 5]  # the new run, and the run it is compared with
    assert _ours(written, project) == {
        "runs/run-5.md", "runs/run-5.de.md", "runs/run-5-evidence.md", "runs/run-5-evidence.de.md",
        "runs/run-5-samples.csv", "runs/run-5-samples.json", "compare/run-5-vs-3.md", "compare/run-5-vs-3.de.md", "runs/index.md", "runs/index.de.md"}
    after = _pages(project)
    index = ("runs/index.md", "runs/index.de.md")
    assert {k: after[k] for k in before if k not in index} == {k: v for k, v in before.items() if k not in index}
    assert "[5](run-5.md)" in after["runs/index.md"]


def test_incremental_pages_equal_a_build_from_scratch(gen, tmp_path):
    gen.add(3)
    step = tmp_path / "step"
    scaffold(step)
    write_articles(gen.path, step)
    gen.add(2)
    write_articles(gen.path, step)
    whole = tmp_path / "whole"
    scaffold(whole)
    write_articles(gen.path, whole)
    assert _pages(step) == _pages(whole)
    assert (step / "site" / "index.md").read_text() == (whole / "site" / "index.md").read_text()


@pytest.mark.parametrize("damage", ["{not json", '{"pages": [], "runs": 7}'])
def test_a_damaged_manifest_means_a_full_build(gen, tmp_path, damage):
    gen.add(3)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    good = _pages(project)
    for p in (project / "site" / "runs").glob("run-*.md"):
        p.write_text("stale")
    (project / "site" / MANIFEST).write_text(damage)
    write_articles(gen.path, project)
    assert _pages(project) == good


def _built_once(gen, tmp_path):
    """Two runs built once into a project: (project, its pages, the manifest's path, the manifest's lines)."""
    gen.add(2)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    path = project / "site" / MANIFEST
    return project, _pages(project), path, path.read_text().split("\n")


@pytest.mark.parametrize("damage", ["cells", "decode", "cut", "small"])
def test_a_summary_that_does_not_parse_is_built_again(gen, tmp_path, counted_views, damage):
    """A run's summary line in the manifest that is not whole (its digest differs: cells or figures
    changed, the line cut short) or whose small part is not a summary's (with a matching digest) is
    found when the manifest is read: the run is read again, never an error when a page reads a cell."""
    from cardproof.report.summaries import _digest

    project, good, path, lines = _built_once(gen, tmp_path)
    assert lines[0] == "cardproof manifest 2" and json.loads(lines[1])["pages"]
    i = next(i for i, line in enumerate(lines) if line.startswith("1\t"))
    whole = lines[i]
    rid, digest, small, cells = lines[i].split("\t")
    assert json.loads(small)["fingerprint"] and json.loads(cells)[0]["model"]
    if damage == "cells":
        cells = json.dumps([{"id": "x"}])
    elif damage == "decode":
        cells = cells.replace('"median":', '"middle":', 1)
    elif damage == "cut":
        cells = cells[:len(cells) // 2]
    else:  # a whole line, but not a summary's
        small = json.dumps({"run_id": 1, "colour": "red"})
        digest = _digest(f"{small}\t{cells}")
    lines[i] = "\t".join([rid, digest, small, cells])
    path.write_text("\n".join(lines))
    counted_views.clear()
    write_articles(gen.path, project)
    assert counted_views == [1]
    assert _pages(project) == good
    assert path.read_text().split("\n")[i] == whole  # written whole again


def test_a_manifest_of_the_older_layout_is_read(gen, tmp_path, counted_views):
    """A project built by the version before (one JSON document) keeps its summaries: no run is read
    again, and the manifest is written in the new layout."""
    from cardproof.report.summaries import RunSummary

    project, good, path, lines = _built_once(gen, tmp_path)
    head = json.loads(lines[1])
    runs = {line.split("\t")[0]: RunSummary.from_line(line).to_json() for line in lines[2:] if line}
    import shutil

    control = tmp_path / "control"
    shutil.copytree(project, control)  # its manifest in the new layout
    path.write_text(json.dumps(head | {"runs": runs}))
    gen.add(1)
    counted_views.clear()
    write_articles(gen.path, control)
    expected = list(counted_views)
    assert 3 in expected and 2 not in expected
    counted_views.clear()
    write_articles(gen.path, project)
    assert counted_views == expected  # the summaries of the older layout were used
    assert path.read_text().startswith("cardproof manifest 2\n")
    assert {k: v for k, v in _pages(project).items() if k in good and "run-3" not in k and "index" not in k} == \
        {k: v for k, v in good.items() if "index" not in k}


def test_summaries_are_read_again_from_the_manifest_file_not_held(gen, tmp_path):
    """A build holds where each run's summary line is in the manifest (a year of them is megabytes), reads
    a line again when its cells or its text are needed, and finds a file that changed in between."""
    from cardproof.report.fingerprints import StoredLine, read_manifest
    from cardproof.report.summaries import RunSummary

    project, _, path, lines = _built_once(gen, tmp_path)
    old = read_manifest(path)
    assert old["runs"] and all(isinstance(v, StoredLine) for v in old["runs"].values())
    by_id = {line.split("\t")[0]: line for line in lines[2:] if line}
    for rid, stored in old["runs"].items():
        kept = RunSummary.from_line(stored.text(), stored.text)
        assert "_line" not in kept.__dict__  # the line is not held...
        assert kept.to_line() == by_id[rid]  # ...and goes back as it was
        assert kept.cells == RunSummary.from_line(by_id[rid]).cells and kept.cells
    stored = next(iter(old["runs"].values()))
    kept = RunSummary.from_line(stored.text(), stored.text)
    path.write_text(path.read_text().replace("\t", " ", 3))  # another text in its place
    with pytest.raises(ValueError, match="changed during the build"):
        kept.cells
    # a build after that reads the summaries it can and makes the others again
    gen.add(1)
    write_articles(gen.path, project)
    assert path.read_text().startswith("cardproof manifest 2\n")
    assert len(read_manifest(path)["runs"]) == len(by_id) + 1


def test_an_older_article_stays_as_published_when_later_runs_arrive(gen, tmp_path):
    """The ratio range of a run covers its campaign up to that run, so run 1's article never changes."""
    gen.add(2)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    first = (project / "site" / "runs" / "run-1.md").read_text()
    gen.add(4)
    write_articles(gen.path, project)
    assert (project / "site" / "runs" / "run-1.md").read_text() == first
    run3 = (project / "site" / "runs" / "run-5.md").read_text()  # third run of campaign A
    assert "across 3 runs of this campaign" in run3


def test_previous_runs_in_one_pass_agree_with_the_query(gen, tmp_path):
    gen.add(6)
    store = open_store(gen.path)
    db = store.db
    with db.conn:  # ties, unfinished runs and a run stored as running whose process is gone
        db.execute("update runs set started_at = (select started_at from runs where id = 1) where id = 3")
        db.execute("update runs set status = 'failed' where id = 5")
        db.execute("update runs set status = 'running' where id = 4")
    store.close()
    db = open_store(gen.path, mode="ro").db
    runs = queries.runs(db)
    assert previous_runs(runs) == {r["id"]: previous_run(db, r) for r in runs}


def test_the_build_module_names_one_place_for_extra_pages():
    producers = build_mod._page_producers()
    assert producers and all(callable(p) for p in producers)


def test_a_copied_project_keeps_building_incrementally(gen, tmp_path, counted_views):
    """The manifest holds no absolute path: a project moved elsewhere is still up to date."""
    gen.add(2)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    moved = tmp_path / "moved"
    shutil.copytree(project, moved)
    counted_views.clear()
    assert _ours(write_articles(gen.path, moved), moved) == set()
    assert counted_views == []


def test_new_rows_for_an_old_run_are_noticed_with_the_table_shortcut(gen, tmp_path, counted_views):
    """Rows added to an old run later (a log imported afterwards) or its gates judged again
    render that run again (and the later run of its campaign that compares with it), nothing else."""
    gen.add(3)  # runs 1 and 3: campaign A; run 2: campaign B
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    write_articles(gen.path, project)  # the whole-table figures are kept now
    store = open_store(gen.path)
    with store.db.conn:
        store.db.execute("insert into log_lines (run_id, raw, attribution) values (1, 'late line', 'unattributed')")
    store.close()
    counted_views.clear()
    write_articles(gen.path, project)
    assert sorted(set(counted_views)) == [1, 3]
    store = open_store(gen.path)
    with store.db.conn:  # as daemon/run/judge.py judges a run again: its gate rows deleted and written anew
        rows = store.db.execute("select sample_id, gate, 1, observed, observed_text, threshold from gate_results "
                                "where sample_id in (select id from samples where run_id = 2)").fetchall()
        store.db.execute("delete from gate_results where sample_id in (select id from samples where run_id = 2)")
        store.db.conn.executemany("insert into gate_results (sample_id, gate, fired, observed, observed_text, "
                                  "threshold) values (?,?,?,?,?,?)", rows)
    store.close()
    counted_views.clear()
    write_articles(gen.path, project)
    # the deletions are counted by the store's triggers in buckets of 4,096 ids (daemon/store/migrations.py
    # m022); in this small store every run's gate rows share one, so every run is read again with run 2
    assert sorted(counted_views) == [1, 2, 3]


def test_a_row_changed_in_place_renders_its_run_again(gen, tmp_path):
    """A sample's counters filled in from the server log after the run (daemon/logs/requests.py) or a
    log line attributed to a load later change no run's row count or highest id: the store's change
    counts (``row_changes``) still make the run's pages again, and they equal a build from nothing."""
    gen.add(2)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    store = open_store(gen.path)
    with store.db.conn:
        sid = store.db.execute("select min(id) from samples where run_id = 2 and kind = 'measure'").fetchone()[0]
        store.db.execute("update samples set cached_tokens = 4321 where id = ?", [sid])
    store.close()
    written = {p.name for p in write_articles(gen.path, project)}
    assert "run-2-evidence.md" in written
    assert "4,321" in (project / "site" / "runs" / "run-2-evidence.md").read_text()
    fresh = tmp_path / "fresh"
    scaffold(fresh)
    write_articles(gen.path, fresh)
    for name in ("run-2.md", "run-2-evidence.md", "run-2.de.md", "run-2-evidence.de.md"):
        assert (project / "site" / "runs" / name).read_text() == (fresh / "site" / "runs" / name).read_text()


def test_a_full_build_holds_a_bounded_number_of_run_views():
    """Memory does not grow with the database: the views built last are kept, older ones dropped."""
    built = []
    views = build_mod._RecentViews(lambda rid: built.append(rid) or {"id": rid}, keep=3)
    for rid in (1, 2, 3, 1, 4, 5):
        views.of(rid)
    assert len(views) == 3 and list(views) == [1, 4, 5]  # 1 was used again, so 2 and 3 went first
    views.of(2)
    assert built == [1, 2, 3, 4, 5, 2]


def test_a_run_whose_steps_change_renders_its_article_not_its_evidence(gen, tmp_path, monkeypatch):
    """A later run that confirms a step changes the lead of the run that starts it: that
    article is rendered again; its evidence page and sample files, which name no step, are not."""
    gen.add(4)
    project = tmp_path / "proj"
    scaffold(project)
    write_articles(gen.path, project)
    evidence_before = (project / "site" / "runs" / "run-1-evidence.md").read_text()
    real_print = build_mod.steps_print
    real_pass = build_mod.trend_pass
    monkeypatch.setattr(build_mod, "trend_pass", lambda *a, **k: ({1: "a step starts here"}, real_pass(*a, **k)[1]))
    monkeypatch.setattr(build_mod, "steps_print", lambda steps: "moved" if steps else real_print(steps))
    monkeypatch.setattr(build_mod, "lead_steps", lambda steps: [])
    rendered, evidence = [], []
    real_run, real_evidence = build_mod.render_run, build_mod.render_evidence
    monkeypatch.setattr(build_mod, "render_run", lambda view, lang, *a, **k: (
        rendered.append((view["run"]["id"], lang)), real_run(view, lang, *a, **k))[1])
    monkeypatch.setattr(build_mod, "render_evidence", lambda view, lang, **k: (
        evidence.append((view["run"]["id"], lang)), real_evidence(view, lang, **k))[1])
    gen.add(1)  # run 5, whose arrival moves the steps (the patched ones: run 1 now starts one)
    written = write_articles(gen.path, project)
    assert sorted(rendered) == [(1, "de"), (1, "en"), (5, "de"), (5, "en")]
    assert sorted(evidence) == [(5, "de"), (5, "en")]
    assert not {p.name for p in written} & {"run-1-evidence.md", "run-1-evidence.de.md", "run-1-samples.csv",
                                              "run-1-samples.json"}
    assert (project / "site" / "runs" / "run-1-evidence.md").read_text() == evidence_before
    # a lost evidence page is rendered again although its key is fresh
    (project / "site" / "runs" / "run-2-evidence.de.md").unlink()
    gen.add(1)
    write_articles(gen.path, project)
    assert (2, "de") in evidence and (project / "site" / "runs" / "run-2-evidence.de.md").is_file()
