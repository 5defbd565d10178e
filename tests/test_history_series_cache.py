"""The report build makes the trend pages one page at a time and keeps each page's points between builds
(report/history/pages.py).

Generated runs on real SQLite (tests/history_data.py, bench/history_steps_data.py): prompt-class cells
with a known step, load, rate and depth steps, two campaigns. After every kind of change (a new run, a
changed run, a deleted run, damaged cache files) the trend pages, their charts and data files and the
run articles' leads must be what a build from nothing writes; what is kept must really be read, and a
campaign none of whose runs changed must not be read at all.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from cardproof.daemon.store import open_store
from cardproof.report.build import write_articles
from cardproof.report.history import cache_json
from cardproof.report.history import pages as pages_module
from cardproof.report.history import series as series_module
from history_data import make_db

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from history_steps_data import add_steps  # noqa: E402

RUNS = [{"level": 100.0, "build": "b1"}] * 5 + [{"level": 85.0, "build": "b2"}] * 4


def _site(project: Path) -> dict[str, bytes]:
    """The trend pages, charts, data files and the run articles (whose leads name the steps)."""
    site = project / "site"
    files = [*(site / "trends").rglob("*"), *(site / "runs").glob("run-*.md")]
    return {str(f.relative_to(site)): f.read_bytes() for f in sorted(files)
            if f.is_file() and not f.name.startswith(".")}


#: what a build from nothing writes, by the store's rows: a pure function of them (and of the code), so
#: the tests that reach the same store (the six kinds of damaged cache files) build it once
_FRESH: dict[str, dict[str, bytes]] = {}


def _fresh_site(db: Path, tmp_path: Path, tag: str) -> dict[str, bytes]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        # every row but the migrations' times of application, which differ from store to store and
        # reach no trend page or run article (what ``_site`` compares)
        key = hashlib.sha256("\n".join(ln for ln in conn.iterdump() if '"_sqlite_migrations"' not in ln)
                             .encode()).hexdigest()
    finally:
        conn.close()
    if key not in _FRESH:
        fresh = tmp_path / f"fresh-{tag}"
        write_articles(db, fresh)
        _FRESH[key] = _site(fresh)
    return _FRESH[key]


def _same_as_fresh(db: Path, project: Path, tmp_path: Path, tag: str) -> None:
    write_articles(db, project)
    mine, theirs = _site(project), _fresh_site(db, tmp_path, tag)
    assert sorted(mine) == sorted(theirs)
    assert [k for k in mine if mine[k] != theirs[k]] == []
    assert any(k.startswith("trends/trend-") and k.endswith(".md") for k in mine)


def _two_campaigns(tmp_path: Path) -> tuple[Path, list[int], list[int]]:
    db = tmp_path / "h.db"
    nightly = make_db(db, RUNS, name="nightly")
    add_steps(db, rates=(0.5,))
    weekly = make_db(db, RUNS, name="weekly", model="tiny-b", seed=2)
    return db, nightly, weekly


def _page_files(project: Path) -> list[Path]:
    return sorted((project / "site").glob(".cardproof-series-*.json"))


def _reads(monkeypatch) -> list[str]:
    """The cache files the build reads, by name."""
    seen = []
    real = pages_module._read

    def read(path):
        if path.exists():
            seen.append(path.name)
        return real(path)

    monkeypatch.setattr(pages_module, "_read", read)
    return seen


def test_pages_after_new_changed_and_deleted_runs_are_what_a_build_from_nothing_writes(tmp_path):
    db, nightly, weekly = _two_campaigns(tmp_path)
    project = tmp_path / "proj"
    write_articles(db, project)
    text = "".join(v.decode() for k, v in _site(project).items() if k.startswith("runs/"))
    assert "This run starts a step" in text  # the known step reaches a lead through the kept steps
    # one file per page (campaign × model) and the head
    assert len(_page_files(project)) == 2 and (project / "site" / pages_module.HEAD).is_file()

    make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)  # a new nightly run
    _same_as_fresh(db, project, tmp_path, "new")
    store = open_store(db)  # a changed run: found interrupted after all (its point can carry no step now)
    with store.db.conn:
        store.db.execute("update runs set status = 'interrupted' where id = ?", [nightly[6]])
    store.close()
    _same_as_fresh(db, project, tmp_path, "changed")
    store = open_store(db)  # a deleted run of the other campaign
    with store.db.conn:
        for table in ("samples", "cells", "loads"):
            store.db.execute(f"delete from {table} where run_id = ?", [weekly[3]])
        store.db.execute("delete from runs where id = ?", [weekly[3]])
    store.close()
    _same_as_fresh(db, project, tmp_path, "deleted")


def test_a_campaign_whose_runs_did_not_change_is_not_read_and_a_changed_one_is_read_from_its_files(
        tmp_path, monkeypatch):
    db, nightly, weekly = _two_campaigns(tmp_path)
    project = tmp_path / "proj"
    write_articles(db, project)
    files = {cache_json.loads(f.read_bytes())["campaign"]: f for f in _page_files(project)}
    seen = _reads(monkeypatch)
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)
    _same_as_fresh(db, project, tmp_path, "a")
    mine = [n for n in seen if n != pages_module.HEAD]
    assert mine == [files["nightly"].name]  # the fresh build had none to read

    # what the nightly file keeps is what its page shows: a doctored figure shows after the next run
    part = cache_json.loads(files["nightly"].read_bytes())
    rid = nightly[1]
    _, points = part["runs"][rid]
    for _key, p in points:
        sp = p["spread"].get("decode_tps")
        if sp:
            p["spread"]["decode_tps"] = sp.__class__(4321.5, sp.low, sp.high, sp.n)
    part["texts"] = {}  # its rows and lines are made again from the doctored points
    files["nightly"].write_bytes(cache_json.dumps(part))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=4)
    write_articles(db, project)
    csv = next((project / "site" / "trends").glob("trend-nightly-*.csv")).read_text()
    assert "4321.5" in csv

    # the weekly file is not read while its runs stay: a doctored figure there does not show...
    part = cache_json.loads(files["weekly"].read_bytes())
    for _key, p in part["runs"][weekly[0]][1]:
        sp = p["spread"].get("decode_tps")
        if sp:
            p["spread"]["decode_tps"] = sp.__class__(9876.5, sp.low, sp.high, sp.n)
    part["texts"] = {}
    files["weekly"].write_bytes(cache_json.dumps(part))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=5)
    write_articles(db, project)
    assert "9876.5" not in next((project / "site" / "trends").glob("trend-weekly-*.csv")).read_text()
    # ...until a weekly run is added: then its file is read, and the doctored figure is what it held
    make_db(db, [{"level": 100.0, "build": "b1"}], name="weekly", model="tiny-b", seed=6)
    write_articles(db, project)
    assert "9876.5" in next((project / "site" / "trends").glob("trend-weekly-*.csv")).read_text()


@pytest.fixture(scope="module")
def built_two(tmp_path_factory):
    """Two campaigns' store and a project built from it, once for the damage cases (each works on a copy:
    a copied project's caches are read like the original's)."""
    tmp = tmp_path_factory.mktemp("built-two")
    db, nightly, weekly = _two_campaigns(tmp)
    write_articles(db, tmp / "proj")
    return db, nightly, tmp / "proj"


@pytest.mark.parametrize("damage", ["head cut short", "head of other code", "page file cut short",
                                    "page file of another page", "page file removed", "points of another run",
                                    "page file an old pickle", "head an old pickle", "page file of an unknown tag"])
def test_damaged_cache_files_are_no_cache(tmp_path, damage, built_two):
    src_db, nightly, src_project = built_two
    db, project = tmp_path / "h.db", tmp_path / "proj"
    shutil.copy(src_db, db)
    shutil.copytree(src_project, project)
    head = project / "site" / pages_module.HEAD
    files = {cache_json.loads(f.read_bytes())["campaign"]: f for f in _page_files(project)}
    if damage == "head cut short":
        head.write_bytes(head.read_bytes()[:50])
    elif damage == "head of other code":
        head.write_bytes(cache_json.dumps({"format": 5, "campaigns": {}}))
    elif damage == "page file cut short":
        files["nightly"].write_bytes(files["nightly"].read_bytes()[:200])
    elif damage == "page file of another page":
        files["nightly"].write_bytes(files["weekly"].read_bytes())
    elif damage == "page file removed":
        files["weekly"].unlink()
    elif damage == "page file an old pickle":  # what an older cardproof wrote: never unpickled
        files["nightly"].write_bytes(pickle.dumps(cache_json.loads(files["nightly"].read_bytes())))
    elif damage == "head an old pickle":
        head.write_bytes(pickle.dumps(cache_json.loads(head.read_bytes())))
    elif damage == "page file of an unknown tag":
        raw = files["nightly"].read_bytes()
        assert b'"$t":"spread"' in raw
        files["nightly"].write_bytes(raw.replace(b'"$t":"spread"', b'"$t":"other"'))
    else:
        part = cache_json.loads(files["nightly"].read_bytes())
        part["runs"][nightly[0]] = part["runs"][nightly[1]]
        files["nightly"].write_bytes(cache_json.dumps(part))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)
    _same_as_fresh(db, project, tmp_path, "damaged")
    assert len(_page_files(project)) == 2 and cache_json.loads(head.read_bytes())["format"] == pages_module.FORMAT
    for f in [head, *_page_files(project)]:  # rebuilt, and as JSON again
        assert json.loads(f.read_bytes())["format"] == pages_module.FORMAT


def test_the_cache_files_are_json_and_an_older_layouts_pickles_are_removed(tmp_path):
    """The caches sit in the site's source folder: they are read as data (JSON), never unpickled."""
    db, _, _ = _two_campaigns(tmp_path)
    project = tmp_path / "proj"
    site = project / "site"
    site.mkdir(parents=True)
    old = [site / ".cardproof-trends-head.pickle", site / ".cardproof-series-0123456789abcdef01234567.pickle"]
    for f in old:
        f.write_bytes(pickle.dumps({"format": 8, "campaigns": {}}))
    write_articles(db, project)
    files = [site / pages_module.HEAD, *_page_files(project)]
    assert len(files) == 3
    for f in files:
        data = json.loads(f.read_bytes())
        assert isinstance(data, dict) and data["format"] == pages_module.FORMAT
    assert not [f for f in old if f.exists()]
    assert not list(site.glob(".cardproof-*.pickle"))
    # what a page file keeps reads back as the values it was made of
    part = cache_json.loads(_page_files(project)[0].read_bytes())
    assert cache_json.loads(cache_json.dumps(part)) == part
    assert any(type(k) is int for k in part["runs"]) and any(type(k) is tuple for k in part["texts"])


def test_the_cache_codec_refuses_what_it_cannot_write_back():
    with pytest.raises(TypeError, match="no JSON form"):
        cache_json.dumps({"a": object()})
    with pytest.raises(ValueError, match="unknown tag"):
        cache_json.loads(b'{"$t": "other", "v": 1}')
    value = {1: ("a", [2.5, None]), ("k", 3): {"$t": "x"}}
    assert cache_json.loads(cache_json.dumps(value)) == value


def test_steps_are_searched_again_only_in_series_with_a_new_point(tmp_path, monkeypatch):
    db, _, _ = _two_campaigns(tmp_path)
    project = tmp_path / "proj"
    calls = []
    search = series_module.find_steps
    monkeypatch.setattr(series_module, "find_steps", lambda *a, **k: calls.append(a[2]) or search(*a, **k))
    write_articles(db, project)
    first = list(calls)
    assert any(seed.startswith("weekly|") for seed in first) and any(seed.startswith("nightly|") for seed in first)
    calls.clear()
    make_db(db, [{"level": 100.0, "build": "b1"}], name="weekly", model="tiny-b", seed=6)
    write_articles(db, project)
    # only the weekly series are searched again (the nightly campaign is not even read)
    assert calls and all(seed.startswith("weekly|") for seed in calls)
    # a memo entry is what the page shows: a doctored one shows (the memo is really read)
    [f] = [f for f in _page_files(project) if cache_json.loads(f.read_bytes())["campaign"] == "nightly"]
    part = cache_json.loads(f.read_bytes())
    key = next(k for k, v in part["steps"].items() if v and "decode_tps" in k[0])
    part["steps"][key] = [part["steps"][key][0].__class__(**{**part["steps"][key][0].__dict__, "ratio": 0.123})]
    part["texts"] = {}
    f.write_bytes(cache_json.dumps(part))
    (project / "site" / "trends" / ".trends.json").unlink()  # the page is rendered again from its file
    make_db(db, [{"level": 100.0, "build": "b1"}], name="weekly", model="tiny-b", seed=7)  # (a build to do)
    write_articles(db, project)
    assert "87.7" in next((project / "site" / "trends").glob("trend-nightly-*.md")).read_text()  # 1 - 0.123


def test_a_first_build_reads_the_store_one_model_at_a_time(tmp_path, monkeypatch):
    """With more new runs than ``FEW_RUNS`` (a first build, a code change) each page reads its own model's
    rows: one page's points are held at once, and the pages are the same."""
    db = tmp_path / "h.db"
    make_db(db, RUNS, name="nightly")
    make_db(db, RUNS, name="nightly", model="tiny-b", seed=2)
    add_steps(db)
    write_articles(db, tmp_path / "whole")
    calls = []
    real = series_module._run_points

    def counted(db_, runs, model, restrict, excluded=None):
        made = real(db_, runs, model, restrict, excluded)
        calls.append((model, {k[1] for pts in made.values() for k, _ in pts}))
        return made

    monkeypatch.setattr(pages_module, "_run_points", counted)
    monkeypatch.setattr(pages_module, "FEW_RUNS", 3)
    write_articles(db, tmp_path / "by-model")
    assert sorted(m for m, _ in calls) == ["tiny-a", "tiny-b"]
    assert all(seen == {m} for m, seen in calls)
    assert _site(tmp_path / "by-model") == _site(tmp_path / "whole")


def test_a_point_keeps_its_table_rows_and_data_line_and_they_are_what_a_fresh_build_writes(tmp_path):
    """The trend pages' table rows and CSV lines of runs that did not change are kept in the page's file
    (report/history/tables.py, render.py ``write_data_file``): after a new run the pages are what a
    build from nothing writes, and a doctored row or line in the file shows (it is really read). A run
    deleted before a point changes what that point's row shows (the conditions that changed since the
    point before it): the row is made again."""
    db = tmp_path / "h.db"
    ids = make_db(db, RUNS + [{"level": 85.0, "build": "b3"}] * 2)
    last = ids[-1]  # its build is its previous run's: no change shown, until that run goes
    project = tmp_path / "proj"
    write_articles(db, project)
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)
    _same_as_fresh(db, project, tmp_path, "a")

    def pages(p, suffix):
        return {f.name: f.read_text() for f in sorted((p / "site" / "trends").iterdir()) if f.suffix == suffix}

    [path] = _page_files(project)

    def doctor(how):
        part = cache_json.loads(path.read_bytes())
        mine = [k for k in part["texts"] if k[1] == last]
        assert mine and all(part["texts"][k][1] and part["texts"][k][2] for k in mine)
        for k in mine:
            part["texts"][k] = how(*part["texts"][k])
        path.write_bytes(cache_json.dumps(part))

    doctor(lambda fp, rows, line: (fp, {r: v.replace(" | ", " | DOCTORED-ROW ", 1) for r, v in rows.items()},
                                   (line[0], "DOCTORED,LINE\r\n")))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=4)
    write_articles(db, project)
    trend_pages = [t for n, t in pages(project, ".md").items() if n.startswith("trend-")]
    assert trend_pages and all("DOCTORED-ROW" in t for t in trend_pages)
    assert all("DOCTORED,LINE" in t for t in pages(project, ".csv").values())
    # texts kept for other run data (another fingerprint: other rows or other code) are not used
    doctor(lambda fp, rows, line: ("another fingerprint", {r: "DOCTORED-ROW" for r in rows},
                                   (line[0], "DOCTORED,LINE\r\n")))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=5)
    write_articles(db, project)
    assert "DOCTORED" not in "".join(pages(project, ".md").values()) + "".join(pages(project, ".csv").values())

    # the run before it goes: its point now follows a run of build b2, its row says so and is made again
    doctor(lambda fp, rows, line: (fp, {r: v.replace(" | ", " | DOCTORED-ROW ", 1) for r, v in rows.items()}, line))
    store = open_store(db)
    with store.db.conn:
        for table in ("samples", "cells", "loads"):
            store.db.execute(f"delete from {table} where run_id = ?", [ids[-2]])
        store.db.execute("delete from runs where id = ?", [ids[-2]])
    store.close()
    _same_as_fresh(db, project, tmp_path, "b")
    assert "DOCTORED-ROW" not in "".join(pages(project, ".md").values())
