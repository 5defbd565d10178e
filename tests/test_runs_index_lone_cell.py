"""The runs index and the home page say when a class's headline rests on its only stable cell.

The real run of tests/test_article_findings.py with fixed decode rates in a
copy of its database: tiny-b · medium spreads by 3 (unstable at the
campaign's 2.0), so tiny-a is medium's only stable cell; short compares both.
"""

from __future__ import annotations

from test_article_findings import _build, _rates, _set_rates  # noqa: F401


def test_lone_stable_cell_is_named_as_such_in_the_index_and_home(canary_run_db, tmp_path):  # noqa: F811
    db_path = tmp_path / "lone.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__medium__off": [100.0, 100.0, 300.0]}))
    project = tmp_path / "p"
    _build(db_path, project)
    index = (project / "site" / "runs" / "index.md").read_text()
    row = next(ln for ln in index.splitlines() if ln.startswith("| [1](run-1.md)"))
    assert "short: **tiny-b** ×1.82–2.20; medium: **tiny-a** (the only stable cell)" in row, row
    home = (project / "site" / "index.md").read_text()
    assert "medium: **tiny-a** (the only stable cell)" in home
    de = (project / "site" / "runs" / "index.de.md").read_text()
    assert "mittel: **tiny-a** (die einzige stabile Zelle)" in de
