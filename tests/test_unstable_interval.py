"""The bootstrap variant of the unstable-cell rule: ``[report] unstable_interval_pct``.

Beside max/min > ``unstable_ratio`` a campaign may mark a cell unstable where
the 95 % bootstrap interval of its median is wider than ±N %. The bootstrap
draws from a fixed seed, so the verdict is the same in every build. The
article tests use the real run of tests/test_article_findings.py (a real
llama-server, real SQLite) with fixed decode rates written into a copy of its
database, and the frozen campaign text extended by the key.
"""

from __future__ import annotations

import random

import pytest

from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.campaign.check import CampaignError
from cardproof.daemon.store import open_store
from cardproof.report import findings, queries
from cardproof.report.stats import spread
from test_article_findings import _build, _rates, _row, _set_rates, _text  # noqa: F401


def _cell(values):
    valid = [{"decode_tps": v} for v in values]
    return {"decode": spread(values), "valid": valid}


def test_interval_is_deterministic_and_independent_of_sample_order():
    rng = random.Random(1)
    values = [rng.uniform(80, 140) for _ in range(25)]
    first = findings.median_interval(values)
    shuffled = values[::-1]
    assert findings.median_interval(shuffled) == first == findings.median_interval(values)
    low, high = first
    assert min(values) <= low <= sorted(values)[12] <= high <= max(values) and low < high
    assert findings.median_interval([5.0]) is None and findings.median_interval([]) is None


def test_interval_rule_fires_where_the_ratio_does_not_and_the_other_way_round():
    limits = {"unstable_ratio": 1.5, "unstable_interval_pct": 10.0}
    # three samples spread by 1.3: stable by the ratio, but the median's interval is 100–130 around 100
    narrow_ratio = _cell([100.0, 100.0, 130.0])
    findings.judge_cell(narrow_ratio, limits)
    assert narrow_ratio["unstable_by"] == ["interval"] and narrow_ratio["unstable"]
    assert narrow_ratio["median_interval"] == (100.0, 130.0)
    # twenty samples, two wild outliers: max/min is 30, yet the median's interval is the median itself
    outliers = _cell([100.0] * 18 + [10.0, 300.0])
    findings.judge_cell(outliers, limits)
    assert outliers["unstable_by"] == ["ratio"] and outliers["median_interval"] == (100.0, 100.0)
    # within ±10 % on both sides: stable by both rules
    calm = _cell([100.0, 104.0, 108.0, 96.0, 101.0])
    findings.judge_cell(calm, limits)
    assert calm["unstable_by"] == [] and not calm["unstable"]
    # without the key the interval is not computed and cannot fire
    findings.judge_cell(narrow_ratio, {"unstable_ratio": 1.5, "unstable_interval_pct": None})
    assert narrow_ratio["unstable_by"] == [] and narrow_ratio["median_interval"] is None


def test_zero_median_with_any_spread_is_unstable():
    cell = _cell([0.0, 0.0, 0.0, 5.0])
    findings.judge_cell(cell, {"unstable_ratio": 100.0, "unstable_interval_pct": 50.0})
    assert "interval" in cell["unstable_by"]


@pytest.mark.parametrize("value", ["0", "0.1", "101", '"10%"', "true", "nan", "1e400"])
def test_unstable_interval_pct_is_validated(value):
    with pytest.raises(CampaignError) as exc:
        parse_campaign(_text("http://127.0.0.1:1", f"\n[report]\nunstable_interval_pct = {value}\n"), "bad.toml")
    assert "report.unstable_interval_pct" in str(exc.value) and "bad.toml" in str(exc.value)


def test_report_limits_read_the_frozen_campaign():
    text = _text("http://127.0.0.1:1", "\n[report]\nunstable_interval_pct = 12.5\n")
    assert findings.report_limits(normalised_text(text)) == {"unstable_ratio": 1.5, "unstable_interval_pct": 12.5,
                                                             "min_effect_pct": 5.0}
    assert findings.report_limits(normalised_text(_text("http://127.0.0.1:1")))["unstable_interval_pct"] is None
    # a campaign unreadable when frozen (NULL), or a damaged row, builds with the defaults
    for damaged in (None, "[report\n", '{"report": {"unstable_ratio": "x"}}'):
        assert findings.report_limits(damaged) == {"unstable_ratio": 1.5, "unstable_interval_pct": None}


def _with_interval(canary_run_db, tmp_path, rates, pct="10"):  # noqa: F811
    db_path = tmp_path / "interval.db"
    _set_rates(canary_run_db, db_path, rates)
    store = open_store(db_path)
    # the frozen text ends with [report] unstable_ratio = 2.0's table further up; a key of its own goes there
    text = store.db.execute("select toml_text from campaigns").fetchone()[0]
    assert "[report]\nunstable_ratio = 2.0\n" in text
    text = text.replace("[report]\nunstable_ratio = 2.0\n", f"[report]\nunstable_ratio = 2.0\nunstable_interval_pct = {pct}\n")
    store.db.execute("update campaigns set toml_text = ?, campaign_json = ?", [text, normalised_text(text)])
    store.db.conn.commit()
    store.close()
    return db_path


def test_a_cell_unstable_by_its_interval_is_marked_named_and_kept_out_of_the_headline(canary_run_db, tmp_path):  # noqa: F811
    """tiny-b · short spreads by 1.3 (stable at the campaign's ratio 2.0) with its median at the slow end:
    the interval 100–130 reaches 30 % above the median, beyond ±10 %."""
    db_path = _with_interval(canary_run_db, tmp_path, _rates(**{"tiny-b__short__off": [100.0, 130.0, 100.0]}))
    db = open_store(db_path, mode="ro").db
    en, de, run_id = _build(db_path, tmp_path / "p")
    view = queries.run_view(db, run_id)
    short = next(c for c in view["cells"] if c["model"] == "tiny-b" and c["prompt_class"] == "short"
                 and not c["reasoning"])
    assert [c["id"] for c in view["unstable_cells"]] == [short["id"]]
    assert short["unstable_by"] == ["interval"] and view["unstable_interval_pct"] == 10.0
    row = _row(en, "tiny-b")
    assert f"#cell-{short['id']})<br><small>100.0–130.0 · n=3</small> <small>**unstable**</small>" in row, row
    box = en[en.index('!!! warning "Unstable cells"'):]
    box = box[:box.index("\n\n")]
    assert "95 % bootstrap interval of the median was wider than ±10.00 %: tiny-b · short" in box
    assert f"run-{run_id}-evidence.md#cell-{short['id']}" in box
    assert "wider than ±10.00 %" in en[en.index("## The numbers"):en.index("## Reasoning")]
    assert "95-%-Bootstrap-Intervall des Medians breiter als ±10,00 %: tiny-b · kurz" in de
    head = en[en.index("## Headline"):en.index("## The numbers")]
    assert "Left out as unstable: tiny-b · short" in head
    assert all(r["best_cell"]["id"] != short["id"] and (r["other_cell"] or {}).get("id") != short["id"]
               for r in view["headline"]["rows"])
    # the same database builds the same article: the seed is fixed
    again, _, _ = _build(db_path, tmp_path / "p2")
    assert again == en


def test_without_the_key_the_same_cell_is_stable(canary_run_db, tmp_path):  # noqa: F811
    db_path = tmp_path / "plain.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__short__off": [100.0, 130.0, 100.0]}))
    en, _de, run_id = _build(db_path, tmp_path / "p")
    view = queries.run_view(open_store(db_path, mode="ro").db, run_id)
    assert view["unstable_cells"] == [] and view["unstable_interval_pct"] is None
    assert "bootstrap" not in en


def test_both_rules_in_one_box(canary_run_db, tmp_path):  # noqa: F811
    """tiny-b · short by its interval (1.3 spread), tiny-a · medium by its ratio (3.0 spread): one box, two items."""
    db_path = _with_interval(canary_run_db, tmp_path, _rates(**{"tiny-b__short__off": [100.0, 130.0, 100.0],
                                                                "tiny-a__medium__off": [50.0, 50.0, 150.0]}))
    en, _de, _ = _build(db_path, tmp_path / "p")
    assert en.count('!!! warning "Unstable cells"') == 1
    box = en[en.index('!!! warning "Unstable cells"'):]
    box = box[:box.index("\n\n")]
    items = [ln for ln in box.splitlines() if ln.startswith("    - ")]
    assert len(items) == 2, box
    assert "more than 2.00 times the slowest: tiny-a · medium" in items[0]
    # tiny-a · medium (50, 50, 150) is also wider than ±10 % around its median of 50
    assert "wider than ±10.00 %: tiny-b · short; tiny-a · medium" in items[1] or \
           "wider than ±10.00 %: tiny-a · medium; tiny-b · short" in items[1], items[1]

