"""The runs index and the home page say why a finished run states no headline, instead of a bare "—".

The real run of tests/test_article_findings.py with fixed decode rates in a
copy of its database (as tests/test_runs_index_lone_cell.py does).
"""

from __future__ import annotations

from test_article_findings import _build, _rates, _set_rates  # noqa: F401


def test_every_cell_unstable_is_said_in_the_index_and_home(canary_run_db, tmp_path):  # noqa: F811
    db_path = tmp_path / "noisy.db"
    noisy = {k: [100.0, 100.0, 300.0] for k in ("tiny-b__short__off", "tiny-b__medium__off",
                                                "tiny-a__short__off", "tiny-a__medium__off",
                                                "tiny-b__short__on", "tiny-b__medium__on",
                                                "tiny-a__short__on", "tiny-a__medium__on")}
    _set_rates(canary_run_db, db_path, _rates(**noisy))
    project = tmp_path / "p"
    _build(db_path, project)
    index = (project / "site" / "runs" / "index.md").read_text()
    row = next(ln for ln in index.splitlines() if ln.startswith("| [1](run-1.md)"))
    assert "every cell unstable: no headline" in row, row
    assert "—" not in row.split("|")[4], row
    home = (project / "site" / "index.md").read_text()
    assert "every cell unstable: no headline" in home
    de = (project / "site" / "runs" / "index.de.md").read_text()
    assert "jede Zelle instabil: kein Ergebnis in einem Satz" in de


def test_a_stable_run_keeps_its_headline_in_the_index(canary_run_db, tmp_path):  # noqa: F811
    db_path = tmp_path / "calm.db"
    _set_rates(canary_run_db, db_path, _rates())
    project = tmp_path / "p"
    _build(db_path, project)
    index = (project / "site" / "runs" / "index.md").read_text()
    row = next(ln for ln in index.splitlines() if ln.startswith("| [1](run-1.md)"))
    assert "no headline" not in row and "**tiny-b**" in row, row
