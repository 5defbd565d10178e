"""The decision's speed table states no ratio from an unstable cell, and none where the ranges overlap.

The real run of tests/test_article_findings.py (real llama-server, real
SQLite, tiny-a pinned as the incumbent) with fixed decode rates written into
a copy of its database: tiny-b · short spreads by 3 (unstable at the
campaign's 2.0), tiny-b · medium overlaps tiny-a · medium, and the reasoning-on
cells stand apart by ×2.
"""

from __future__ import annotations

import statistics

from cardproof.daemon.store import open_store
from cardproof.report.gates import excluded_samples
from cardproof.report.i18n import Lang
from test_article_findings import _build, _rates, _set_rates  # noqa: F401


def _counted(db_path, model: str) -> list[float]:
    """The decode rates of ``model`` · short · reasoning on that the article counts: answered, no excluding gate."""
    db = open_store(db_path, mode="ro").db
    run_id = db.execute("select max(id) from runs").fetchone()[0]
    out = excluded_samples(db, run_id)
    return [v for sid, v in db.execute(
        """select samples.id, decode_tps from samples join cells on cells.id = samples.cell_id
           join models on models.id = cells.model_id
           where models.name = ? and cells.prompt_class = 'short' and cells.reasoning = 1
           and coalesce(cells.kind, 'measure') = 'measure' and coalesce(samples.kind, 'measure') = 'measure'
           and samples.error_kind is null order by samples.id""", [model]) if sid not in out]


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
    # 100, 105 against 50, 52.5 where both cells kept two samples: the real run's gates may leave one out
    b, a = _counted(db_path, "tiny-b"), _counted(db_path, "tiny-a")
    assert b and a
    num = Lang("en").num
    ratio, low, high = statistics.median(b) / statistics.median(a), min(b) / max(a), max(b) / min(a)
    assert 1.9 <= ratio <= 2.1
    if min(len(a), len(b)) >= 2:
        assert rows["short · reasoning on"] == f"{num(ratio, 2)} ({num(low, 2)}–{num(high, 2)})", (rows, a, b)
    else:  # a single sample has no scatter to judge by: never a measurable difference
        assert rows["short · reasoning on"] == "no measurable difference", (rows, a, b)
    de_rows = _speed_rows(de, "### tiny-b ")
    assert de_rows["kurz · Reasoning aus"] == "**instabil**: kein Verhältnis", de_rows
