"""The decision's speed table states no ratio from an unstable cell, and none where the ranges overlap.

The real run of tests/test_article_findings.py (real llama-server, real
SQLite, tiny-a pinned as the incumbent) with fixed decode rates written into
a copy of its database: tiny-b · short spreads by 3 (unstable at the
campaign's 2.0), tiny-b · medium overlaps tiny-a · medium, and the reasoning-on
cells stand apart by ×2.
"""

from __future__ import annotations

from test_article_findings import _build, _rates, _set_rates, canary_run_db  # noqa: F401


def _speed_rows(text: str, heading: str) -> dict[str, str]:
    part = text[text.index(heading):]
    part = part[:part.index("\n#")]
    return {ln.split("|")[1].strip(): ln.split("|")[4].strip() for ln in part.splitlines()
            if ln.startswith("| ") and " · " in ln.split("|")[1]}


def test_speed_table_marks_unstable_and_overlapping_cells(canary_run_db, tmp_path):  # noqa: F811
    db_path = tmp_path / "speed.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__short__off": [100.0, 100.0, 300.0],
                                                 "tiny-b__medium__off": [50.0, 52.0, 54.0]}))
    en, de, _ = _build(db_path, tmp_path / "p")
    rows = _speed_rows(en, "### tiny-b against tiny-a")
    assert rows["short · reasoning off"] == "**unstable**: no ratio", rows
    assert rows["medium · reasoning off"] == "no measurable difference", rows
    assert rows["short · reasoning on"] == "2.00 (1.90–2.10)", rows  # two samples: 100, 105 against 50, 52.5
    de_rows = _speed_rows(de, "### tiny-b ")
    assert de_rows["kurz · Reasoning aus"] == "**instabil**: kein Verhältnis", de_rows
