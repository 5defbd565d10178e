"""``compare``'s "beyond spread" by the trend pages' rule: what n allows (generated runs, real SQLite)."""

from __future__ import annotations

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from cardproof.report.compare import compare_runs
from history_data import make_db


def _row(tmp_path, a_values, b_values, reps):
    ids = make_db(tmp_path / "c.db", [{"level": 1, "values": a_values}, {"level": 1, "values": b_values}],
                  reps=reps)
    store = open_store(tmp_path / "c.db", mode="ro")
    try:
        [row] = compare_runs(store.db, *ids)["rows"]
    finally:
        store.close()
    return row, ids


def test_two_samples_against_two_call_no_change_however_far_apart(tmp_path):
    row, ids = _row(tmp_path, [100.0, 101.0], [80.0, 81.0], 2)
    assert row["deviation"] < -0.15 and row["too_few"] and not row["beyond_spread"]
    out = CliRunner().invoke(cli, ["compare", str(ids[0]), str(ids[1]), "--db", str(tmp_path / "c.db")])
    assert out.exit_code == 0 and "n=2 against 2: too few samples to call a change" in out.output
    assert "beyond spread" not in out.output


def test_enough_tight_samples_call_the_change_with_its_interval(tmp_path):
    row, _ = _row(tmp_path, [99.0, 100.0, 101.0, 100.5, 99.5], [87.0, 88.0, 89.0, 88.5, 87.5], 5)
    assert row["beyond_spread"] and not row["too_few"]
    low, high = row["interval"]
    assert low <= -0.12 <= high < 0


def test_a_shift_smaller_than_the_minimum_effect_is_not_beyond_spread(tmp_path):
    row, _ = _row(tmp_path, [99.9, 100.0, 100.1, 100.05, 99.95], [97.9, 98.0, 98.1, 98.05, 97.95], 5)
    assert row["deviation"] < -0.015 and row["interval"] is None and not row["beyond_spread"]


def test_the_comparison_page_says_what_n_allows_in_both_languages(tmp_path):
    from cardproof.report.build import render_compare

    ids = make_db(tmp_path / "c.db", [{"level": 1, "values": [100.0, 101.0]}, {"level": 1, "values": [80.0, 81.0]}],
                  reps=2)
    store = open_store(tmp_path / "c.db", mode="ro")
    try:
        cmp = compare_runs(store.db, *ids)
    finally:
        store.close()
    assert "too few samples to call a change" in render_compare(cmp, "en")
    assert "zu wenige Messungen, um eine Änderung zu nennen" in render_compare(cmp, "de")
