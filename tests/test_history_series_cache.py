"""The history series keep each run's points between builds (report/history/series.py ``cache``/``prints``).

Generated runs on real SQLite (tests/history_data.py, bench/history_steps_data.py): prompt-class cells
with a known step, load, rate and depth steps. The series made from the cache must be the series made
from the store, run for run; a run whose fingerprint changed, or whose entry is damaged, is read again.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

from cardproof.daemon.store import open_store
from cardproof.report.build import SERIES_CACHE, write_articles
from cardproof.report.history import build_series
from history_data import make_db

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from history_steps_data import add_steps  # noqa: E402

RUNS = [{"level": 100.0, "build": "b1"}] * 5 + [{"level": 85.0, "build": "b2"}] * 4


def _canon(series: list[dict]) -> str:
    """Everything a series says, as text: points with their spreads, states, conditions and changes, steps."""
    def point(p):
        return {k: v for k, v in p.items() if k != "_print"}  # the run's fingerprint, only where prints were given
    return json.dumps([{**{k: v for k, v in s.items() if k != "_memo_keys"}, "points": [point(p) for p in s["points"]],
                        "steps": [{**st, "before": st["before"]["run_id"], "after": st["after"]["run_id"]}
                                  for st in s["steps"]]} for s in series], default=repr, sort_keys=True)


def _series(db: Path, **kw) -> list[dict]:
    store = open_store(db, mode="ro")
    try:
        return build_series(store.db, **kw)
    finally:
        store.close()


def test_series_from_the_cache_are_the_series_from_the_store(tmp_path):
    db = tmp_path / "h.db"
    ids = make_db(db, RUNS)
    add_steps(db, rates=(0.5,))
    fresh = _canon(_series(db))
    assert '"kind": "rate"' in fresh and '"kind": "load"' in fresh and '"kind": "depth"' in fresh
    assert '"metric": "decode_tps"' in fresh  # the known step is there to be kept
    prints = {rid: f"print-{rid}" for rid in ids}
    cache: dict = {}
    assert _canon(_series(db, cache=cache, prints=prints)) == fresh  # filled from the store
    assert sorted(cache) == sorted(str(r) for r in ids)
    cache = pickle.loads(pickle.dumps(cache))  # as written to the file and read back
    assert _canon(_series(db, cache=cache, prints=prints)) == fresh  # every run from the cache

    # the cache is what is read: a value changed in one run's entry shows; a new print reads the store again
    entry = cache[str(ids[0])]
    for _key, fields in entry["points"]:
        if fields["values"].get("decode_tps"):
            fields["values"]["decode_tps"] = [1234.5] * len(fields["values"]["decode_tps"])
    assert "1234.5" in _canon(_series(db, cache=cache, prints=prints))
    prints[ids[0]] = "print-changed"
    assert _canon(_series(db, cache=cache, prints=prints)) == fresh
    assert cache[str(ids[0])]["print"] == "print-changed"

    # damaged entries are read again, never an error
    cache[str(ids[1])] = {"print": prints[ids[1]], "points": "nothing"}
    key, point = cache[str(ids[2])]["points"][0]
    cache[str(ids[2])]["points"][0] = (("another campaign", *key[1:]), point)
    cache[str(ids[3])] = ["not", "an", "entry"]
    assert _canon(_series(db, cache=cache, prints=prints)) == fresh


def test_a_new_run_is_read_and_a_removed_run_leaves_the_cache(tmp_path):
    db = tmp_path / "h.db"
    ids = make_db(db, RUNS)
    prints = {rid: f"print-{rid}" for rid in ids}
    cache: dict = {}
    _series(db, cache=cache, prints=prints)
    more = make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)
    prints[more[0]] = "print-new"
    assert _canon(_series(db, cache=cache, prints=prints)) == _canon(_series(db))
    assert str(more[0]) in cache
    store = open_store(db)
    with store.db.conn:
        for table in ("samples", "cells", "loads"):
            store.db.execute(f"delete from {table} where run_id = ?", [ids[0]])
        store.db.execute("delete from runs where id = ?", [ids[0]])
    store.close()
    assert _canon(_series(db, cache=cache, prints=prints)) == _canon(_series(db))
    assert str(ids[0]) not in cache


def test_the_report_step_keeps_the_cache_beside_its_pages(tmp_path):
    db = tmp_path / "h.db"
    make_db(db, RUNS)
    project = tmp_path / "proj"
    write_articles(db, project)
    [path] = (project / "site").glob(SERIES_CACHE.replace(".pickle", "-*.pickle"))  # one file per campaign
    kept = pickle.loads(path.read_bytes())
    assert kept["format"] == 5 and len(kept["runs"]) == len(RUNS) and kept["steps"] and kept["judged"] \
        and list(kept["series"]) == ["nightly"]
    # a damaged cache file is no cache: the next build reads the store and writes it whole again
    path.write_bytes(pickle.dumps(kept)[:100])  # cut short
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)
    write_articles(db, project)
    assert len(pickle.loads(path.read_bytes())["runs"]) == len(RUNS) + 1
    # a second campaign gets a file of its own; a build that adds a run to it leaves the first one's file
    make_db(db, RUNS[:3], name="weekly", seed=4)
    write_articles(db, project)
    files = sorted((project / "site").glob(SERIES_CACHE.replace(".pickle", "-*.pickle")))
    assert len(files) == 2 and path in files
    before = path.stat().st_mtime_ns
    make_db(db, RUNS[:1], name="weekly", seed=5)
    write_articles(db, project)
    assert path.stat().st_mtime_ns == before
    weekly = pickle.loads(next(f for f in files if f != path).read_bytes())
    assert list(weekly["series"]) == ["weekly"] and len(weekly["runs"]) == 4


def test_steps_are_kept_for_series_whose_runs_did_not_change(tmp_path, monkeypatch):
    """The step search of a series whose runs (and their fingerprints) are unchanged is not run again;
    what the memo gives is what the search gives, and a changed run searches its series again."""
    from cardproof.report.history import series as series_module

    db = tmp_path / "h.db"
    ids = make_db(db, RUNS)
    add_steps(db, rates=(0.5,))
    fresh = _canon(_series(db))
    prints = {rid: f"print-{rid}" for rid in ids}
    calls = []
    search = series_module.find_steps
    monkeypatch.setattr(series_module, "find_steps", lambda *a, **k: calls.append(a[2]) or search(*a, **k))
    cache: dict = {}
    memo: dict = {}
    assert _canon(_series(db, cache=cache, prints=prints, steps_memo=memo)) == fresh
    searched = len(calls)
    assert searched and len(memo) == searched
    calls.clear()
    assert _canon(_series(db, cache=cache, prints=prints, steps_memo=memo)) == fresh
    assert calls == []  # every series' steps from the memo
    # a memo entry is what the series shows: a doctored one shows (the memo is really read)
    key = next(k for k, v in memo.items() if v and "decode_tps" in k[0])
    memo[key] = [memo[key][0].__class__(**{**memo[key][0].__dict__, "ratio": 0.123})]
    assert '"ratio": 0.123' in _canon(_series(db, cache=cache, prints=prints, steps_memo=memo))
    # one run changed: the series it is in are searched again, the memo holds only the keys used
    prints[ids[-1]] = "print-changed"
    calls.clear()
    assert _canon(_series(db, cache=cache, prints=prints, steps_memo=memo)) == fresh
    assert 0 < len(calls) <= searched and len(memo) == searched


def test_a_campaign_whose_runs_did_not_change_keeps_its_finished_series(tmp_path):
    """One new run makes only its own campaign's series again; another campaign's series come from the
    cache as they were (a doctored figure there shows, so they are really read), and are what the store
    gives; a changed run in that campaign makes its series again."""
    db = tmp_path / "h.db"
    ids_a = make_db(db, RUNS, name="nightly")
    ids_b = make_db(db, RUNS, name="weekly", seed=2)
    prints = {rid: f"print-{rid}" for rid in ids_a + ids_b}
    cache: dict = {}
    series_cache: dict = {}
    kw = dict(cache=cache, prints=prints, steps_memo={}, judged_memo={}, series_cache=series_cache)
    assert _canon(_series(db, **kw)) == _canon(_series(db))
    assert set(series_cache) == {"nightly", "weekly"}
    cache, series_cache = pickle.loads(pickle.dumps((cache, series_cache)))  # as the file keeps them
    kw.update(cache=cache, series_cache=series_cache)
    weekly = series_cache["weekly"]["series"]
    weekly[0]["points"][0]["spread"]["decode_tps"] = weekly[0]["points"][0]["spread"]["decode_tps"].__class__(
        4321.5, 1.0, 9999.0, 5)
    more = make_db(db, [{"level": 85.0, "build": "b3"}], name="nightly", seed=3)
    prints[more[0]] = "print-new"
    made = _series(db, **kw)
    assert "4321.5" in _canon(made)  # the weekly series were not made again
    assert [s for s in made if s["campaign"] == "weekly"] == weekly
    assert _canon([s for s in made if s["campaign"] == "nightly"]) == \
        _canon([s for s in _series(db) if s["campaign"] == "nightly"])
    assert sum(p["run_id"] == more[0] for s in made for p in s["points"]) > 0
    # a weekly run changed: its campaign's series are made again from the store
    prints[ids_b[0]] = "print-changed"
    assert _canon(_series(db, **kw)) == _canon(_series(db))


def test_a_point_keeps_its_table_rows_and_data_line_and_they_are_what_a_fresh_build_writes(tmp_path):
    """The trend pages' table rows and CSV lines of runs that did not change are kept on their points in
    the cache file (report/history/tables.py, render.py ``write_data_file``): after a new run the pages
    are what a build from nothing writes, and a doctored row or line in the file shows (it is really
    read). A run deleted before a point changes what that point's row shows (the conditions that changed
    since the point before it): the row is made again."""
    db = tmp_path / "h.db"
    ids = make_db(db, RUNS + [{"level": 85.0, "build": "b3"}] * 2)
    last = ids[-1]  # its build is its previous run's: no change shown, until that run goes
    project = tmp_path / "proj"
    write_articles(db, project)
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=3)
    write_articles(db, project)

    def pages(p, suffix):
        return {f.name: f.read_text() for f in sorted((p / "site" / "trends").iterdir()) if f.suffix == suffix}

    write_articles(db, tmp_path / "fresh")
    for suffix in (".md", ".csv"):
        assert pages(project, suffix) == pages(tmp_path / "fresh", suffix) and pages(project, suffix)
    # kept apart from the series cache (read only for a campaign whose pages are rendered)
    [path] = (project / "site").glob(SERIES_CACHE.replace(".pickle", "-*.pickle"))
    series = pickle.loads(path.read_bytes())["series"]["nightly"]["series"]
    assert not any("_rows" in p or "_csv" in p for s in series for p in s["points"])
    [path] = (project / "site").glob(".cardproof-trend-texts-*.pickle")
    kept = pickle.loads(path.read_bytes())
    mine = [k for k in kept if k[1] == last]
    assert mine and all(kept[k][1] and kept[k][2] for k in mine)
    for k in mine:
        fp, rows, line = kept[k]
        kept[k] = (fp, {r: v.replace(" | ", " | DOCTORED-ROW ", 1) for r, v in rows.items()},
                   (line[0], "DOCTORED,LINE\r\n"))
    path.write_bytes(pickle.dumps(kept))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=4)
    write_articles(db, project)
    trend_pages = [t for n, t in pages(project, ".md").items() if n.startswith("trend-")]
    assert trend_pages and all("DOCTORED-ROW" in t for t in trend_pages)
    assert all("DOCTORED,LINE" in t for t in pages(project, ".csv").values())
    # texts kept for other run data (another fingerprint: other rows or other code) are not used
    kept = pickle.loads(path.read_bytes())
    for k in [k for k in kept if k[1] == last]:
        kept[k] = ("another fingerprint", {r: "DOCTORED-ROW" for r in kept[k][1]}, (kept[k][2][0], "DOCTORED,LINE\r\n"))
    path.write_bytes(pickle.dumps(kept))
    make_db(db, [{"level": 85.0, "build": "b3"}], seed=5)
    write_articles(db, project)
    assert "DOCTORED" not in "".join(pages(project, ".md").values()) + "".join(pages(project, ".csv").values())

    # the run before it goes: its point now follows a run of build b2, its row says so and is made again
    kept = pickle.loads(path.read_bytes())
    for k in [k for k in kept if k[1] == last]:
        kept[k] = (kept[k][0], {r: v.replace(" | ", " | DOCTORED-ROW ", 1) for r, v in kept[k][1].items()}, kept[k][2])
    path.write_bytes(pickle.dumps(kept))
    store = open_store(db)
    with store.db.conn:
        for table in ("samples", "cells", "loads"):
            store.db.execute(f"delete from {table} where run_id = ?", [ids[-2]])
        store.db.execute("delete from runs where id = ?", [ids[-2]])
    store.close()
    write_articles(db, project)
    write_articles(db, tmp_path / "fresh2")
    assert pages(project, ".md") == pages(tmp_path / "fresh2", ".md")
    assert "DOCTORED-ROW" not in "".join(pages(project, ".md").values())
