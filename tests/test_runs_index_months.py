"""A year of nightly runs on the runs index: the latest runs there, every run on its month's page.

Generated runs on real SQLite (tests/history_data.py, one day apart from 1 June), a real report step
and a real ``mkdocs build --strict``. The index shows the latest ``INDEX_RUNS`` (lowered here so a
few dozen runs stand for a year), each month's page lists that month's runs and comparisons, and
a month whose runs did not change is not rendered again.

The generated runs also hold a canary sample in a measure cell with no canary gate named (a row
no gate's figure stands for): its evidence row must not link to a gate figure that is not there,
which made ``mkdocs build --strict`` fail the whole site before.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

from cardproof.report import build as report_build
from cardproof.report import render as report_render
from cardproof.report.build import build, write_articles
from history_data import make_db

RUNS = [{"level": 100.0}] * 35  # 30 in June, 5 in July


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("months")
    db = root / "m.db"
    ids = make_db(db, RUNS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_build, "INDEX_RUNS", 10)
        mp.setattr(report_render, "HOME_RUNS", 8)
        result = build(db, root / "proj")
    return {"root": root, "db": db, "ids": ids, "runs": root / "proj" / "site" / "runs", "site": result["site_dir"]}


def test_the_index_shows_the_latest_runs_and_links_every_month(site):
    runs, ids = site["runs"], site["ids"]
    index = (runs / "index.md").read_text()
    table = re.findall(r"^\| \[(\d+)\]\(run-\d+\.md\)", index, flags=re.M)
    assert [int(x) for x in table] == list(reversed(ids))[:10]
    assert "[2026-06](archive-2026-06.md): 30 runs" in index and "[2026-07](archive-2026-07.md): 5 runs" in index
    de = (runs / "index.de.md").read_text()
    assert "[2026-06](archive-2026-06.md): 30 Läufe" in de and "## Läufe nach Monat" in de
    june = (runs / "archive-2026-06.md").read_text()
    listed = [int(x) for x in re.findall(r"^\| \[(\d+)\]\(run-\d+\.md\)", june, flags=re.M)]
    assert listed == list(reversed(ids[:30]))  # the whole month, newest first
    # each run's comparison with the one before is on its month's page
    assert f"(../compare/run-{ids[29]}-vs-{ids[28]}.md)" in june
    assert "# Läufe aus 2026-06" in (runs / "archive-2026-06.de.md").read_text()
    # each model names its latest runs and points to the trends for the earlier ones
    line = next(ln for ln in index.splitlines() if ln.startswith("- **tiny-a**"))
    assert len(re.findall(r"\[Run \d+\]\(run-\d+\.md\)", line)) == 5, line
    assert "30 earlier runs: [Trends](../trends/index.md)" in line, line
    assert "30 frühere Läufe" in de


def test_the_home_page_lists_the_latest_runs_and_points_to_the_runs_page(site):
    ids = site["ids"]
    home = (site["root"] / "proj" / "site" / "index.md").read_text()
    runs_part = home[home.index("## Runs"):home.index("## Comparisons")]
    listed = [int(x) for x in re.findall(r"^\| \[(\d+)\]\(runs/run-\d+\.md\)", runs_part, flags=re.M)]
    assert listed == list(reversed(ids))[:8]
    assert "The latest 8 of 35 runs; every run is on the [runs page](runs/index.md)." in runs_part
    comparisons = home[home.index("## Comparisons"):]
    assert len(re.findall(r"^- \[Run \d+ against Run \d+\]", comparisons, flags=re.M)) == 8
    assert "The latest 8 of 34 comparisons" in comparisons
    de = (site["root"] / "proj" / "site" / "index.de.md").read_text()
    assert "Die neuesten 8 von 35 Läufen; jeder Lauf steht auf der [Seite der Läufe](runs/index.md)." in de
    # the link is a page of the built site (mkdocs --strict checked it), in both languages
    html = (site["site"] / "index.html").read_text()
    assert 'href="runs/index.html"' in html


def test_the_month_pages_are_built_and_linked_in_the_site(site):
    for page in ("runs/archive-2026-06.html", "runs/archive-2026-07.html", "de/runs/archive-2026-06.html"):
        assert (site["site"] / page).is_file(), page
    html = (site["site"] / "runs" / "index.html").read_text()
    assert 'href="archive-2026-07.html"' in html
    # the build's own records (manifest, series cache, damage memo) stay beside the pages, never in the site
    kept = {p.name for p in (site["root"] / "proj" / "site").glob(".cardproof-*")}
    assert {".cardproof-build.json", ".cardproof-damage-checked.json"} <= kept
    assert [n for n in kept if n.startswith(".cardproof-series-") and n.endswith(".json")]  # one per campaign
    assert not [p for p in site["site"].rglob("*") if p.name.startswith(".cardproof")]


def test_a_month_whose_runs_did_not_change_is_not_rendered_again(site, monkeypatch):
    runs, ids = site["runs"], site["ids"]
    monkeypatch.setattr(report_build, "INDEX_RUNS", 10)
    conn = sqlite3.connect(site["db"])
    with conn:  # a July run found interrupted after all: its month's page must say so
        conn.execute("update runs set status = 'interrupted' where id = ?", [ids[32]])
    conn.close()
    written = {p.name for p in write_articles(site["db"], site["root"] / "proj")}
    assert {"archive-2026-07.md", "archive-2026-07.de.md"} <= written
    assert not {"archive-2026-06.md", "archive-2026-06.de.md"} & written
    assert "interrupted" in (runs / "archive-2026-07.md").read_text()


def test_a_small_site_has_no_month_pages(tmp_path):
    db = tmp_path / "s.db"
    make_db(db, RUNS[:4])
    write_articles(db, tmp_path / "proj")
    runs = tmp_path / "proj" / "site" / "runs"
    assert not list(runs.glob("archive-*")) and "Runs by month" not in (runs / "index.md").read_text()
