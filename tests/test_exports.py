"""Each run's samples (CSV, JSON) and the database are published beside the evidence page, masked like the pages.

Real parts: a run measured against the real llama-server into a real SQLite
store, a real ``report build`` (``mkdocs build --strict``), the exported files
read back with the csv/json/sqlite3 modules. Planted hostile values (a client
address, an API key, a spreadsheet formula) are written into the real store
the way a server's error text or an access log would bring them.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import statistics

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.queries import run_view
from conftest import campaign_text

ADDRESS = "192.168.77.14"
SECRET = "sk-live-0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def published(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    db_path = root / "e.db"
    store = open_store(db_path)
    text = campaign_text(llama_server.url, models=("tiny-a",), classes=("short",), reps=3, max_tokens=8)
    text = text.replace("[campaign]", f'[campaign]\n# the key of a proxy in front: api_key = "{SECRET}"', 1)
    # on a machine without a GPU every sample is off the card and cut at 8 tokens: counted, not excluded
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    run_id = run_campaign(store, parse_campaign(text, "e.toml"), echo=lambda s: None).run_id
    first = store.db.execute("select min(id) from samples where run_id = ? and kind = 'measure'", [run_id]).fetchone()[0]
    # a sample that failed with a text holding an address, a key and a formula
    store.db.execute("update samples set error_kind = 'http', error_text = ? where id = ?",
                     [f"=HYPERLINK(\"http://{ADDRESS}/?k={SECRET}\") from {ADDRESS} Authorization: Bearer {SECRET}",
                      first])
    store.db.conn.commit()
    store.close()
    site = build(db_path, root / "proj")["site_dir"]
    return {"root": root, "db": db_path, "site": site, "run_id": run_id, "failed": first}


def test_samples_as_csv_and_json_re_derive_the_articles_medians(published):
    site, run_id = published["site"], published["run_id"]
    rows = list(csv.DictReader((site / "runs" / f"run-{run_id}-samples.csv").open()))
    doc = json.loads((site / "runs" / f"run-{run_id}-samples.json").read_text())
    assert [int(r["sample_id"]) for r in rows] == [s["sample_id"] for s in doc["samples"]]
    db = open_store(published["db"], mode="ro").db
    view = run_view(db, run_id)
    checked = 0
    for cell in view["cells"]:
        valid = [float(r["decode_tps"]) for r in rows if int(r["cell_id"]) == cell["id"]
                 and not r["error_kind"] and not r["excluded_by"]]
        assert valid, cell["id"]
        assert statistics.median(valid) == pytest.approx(cell["decode"].median)
        checked += 1
    assert checked >= 1


def test_a_formula_address_or_key_in_a_sample_is_neither_run_nor_published(published):
    site, run_id = published["site"], published["run_id"]
    raw = (site / "runs" / f"run-{run_id}-samples.csv").read_text()
    bad = next(r for r in csv.DictReader(raw.splitlines()) if int(r["sample_id"]) == published["failed"])
    assert bad["error_text"].startswith("'=")  # a spreadsheet shows it as text, never runs it
    for text in (raw, (site / "runs" / f"run-{run_id}-samples.json").read_text()):
        assert ADDRESS not in text and SECRET not in text
        assert "192.168.77.x" in text


def test_the_published_database_keeps_every_row_and_no_secret_even_in_its_free_pages(published):
    public = published["site"] / "downloads" / "cardproof.db"
    raw = public.read_bytes()
    assert ADDRESS.encode() not in raw and SECRET.encode() not in raw
    src = sqlite3.connect(published["db"])
    out = sqlite3.connect(public)
    try:
        for table in ("samples", "gate_results", "cells", "runs", "log_lines"):
            assert out.execute(f"select count(*) from {table}").fetchone() == \
                src.execute(f"select count(*) from {table}").fetchone(), table
        campaign = out.execute("select toml_text from campaigns").fetchone()[0]
        assert "[campaign]" in campaign and SECRET not in campaign
    finally:
        src.close()
        out.close()
    # the store itself is untouched: nothing stored is lost to publishing
    stored = sqlite3.connect(published["db"])
    try:
        assert SECRET in stored.execute("select toml_text from campaigns").fetchone()[0]
    finally:
        stored.close()


@pytest.mark.parametrize("lang, folder, words", [("en", "", "the whole database"),
                                                ("de", "de/", "die ganze Datenbank")])
def test_each_evidence_page_links_the_downloads_in_its_language(published, lang, folder, words):
    site, run_id = published["site"], published["run_id"]
    page = (site / f"{folder}runs/run-{run_id}-evidence.html").read_text()
    assert words in page and page.count('id="downloads"') == 2  # the heading and the mark, once
    up = "../../" if folder else ""
    for href in (f"{up}runs/run-{run_id}-samples.csv" if up else f"run-{run_id}-samples.csv",
                 f"{up}runs/run-{run_id}-samples.json" if up else f"run-{run_id}-samples.json",
                 f"{up}downloads/cardproof.db" if up else "../downloads/cardproof.db"):
        assert f'href="{href}"' in page, href
        assert (site / f"{folder}runs" / href).resolve().is_file(), href


def test_a_second_build_keeps_one_downloads_section(published):
    build(published["db"], published["root"] / "proj")
    md = (published["root"] / "proj" / "site" / "runs" / f"run-{published['run_id']}-evidence.de.md").read_text()
    assert md.count("{#downloads}") == 1


def test_an_unchanged_store_leaves_the_downloads_as_they_were(published, tmp_path):
    from cardproof.report.exports import write_exports

    docs = published["root"] / "proj" / "site"
    before = {p: p.stat().st_mtime_ns for p in [*docs.glob("runs/run-*-samples.*"), docs / "downloads" / "cardproof.db"]}
    assert write_exports(published["db"], docs) == []
    assert {p: p.stat().st_mtime_ns for p in before} == before
