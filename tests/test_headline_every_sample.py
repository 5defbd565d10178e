"""Where the headline leaves unstable cells out, the article still says what holds in every sample.

The real run of tests/test_article_findings.py (real llama-server, real
SQLite) with fixed decode rates written into a copy of its database (a real
run's spread on two shared cores is whatever the machine gives): an order is
stated where the slowest sample of one model beats the fastest of the other,
never a ratio, and nothing where the ranges overlap.
"""

from __future__ import annotations

from cardproof.daemon.store import open_store
from cardproof.report import queries
from test_article_findings import _build, _rates, _set_rates  # noqa: F401


def _headline(en: str) -> str:
    """The Headline section alone: up to the next section (Findings, where a run gives any, or The numbers)."""
    start = en.index("## Headline")
    return en[start:en.index("\n## ", start + 1)]


def test_every_cell_unstable_still_states_the_order_every_sample_shows(canary_run_db, tmp_path):  # noqa: F811
    """Every cell spreads by 3 (unstable at the campaign's 2.0); tiny-b's slowest (1,000) beats tiny-a's fastest (300)."""
    rates = {k: ([1000.0, 1000.0, 3000.0] if k[0] == "tiny-b" else [100.0, 100.0, 300.0]) for k in _rates()}
    db_path = tmp_path / "noisy.db"
    _set_rates(canary_run_db, db_path, rates)
    en, de, run_id = _build(db_path, tmp_path / "p")
    head = _headline(en)
    assert "No headline: no prompt class has stable cells to compare" in head
    assert "What holds in every sample, unstable cells included (an order, no ratio):" in head
    view = queries.run_view(open_store(db_path, mode="ro").db, run_id)
    for cls in ("short", "medium"):
        a = view["models"][[m["name"] for m in view["models"]].index("tiny-a")]["cells"][(cls, False)]["id"]
        assert f"- **{cls}**: **tiny-b**'s slowest sample (1,000.0 tok/s) beat the fastest of " \
               f"[tiny-a](run-{run_id}-evidence.md#cell-{a}) (300.0)" in head, head
    assert "×" not in head  # an order, never a ratio, from unstable cells
    assert "Die langsamste Messung von **tiny-b** (1.000,0 Tok./s) war schneller als die schnellste von" in de


def test_overlapping_unstable_cells_state_no_order(canary_run_db, tmp_path):  # noqa: F811
    rates = {k: ([200.0, 200.0, 600.0] if k[0] == "tiny-b" else [100.0, 100.0, 300.0]) for k in _rates()}
    db_path = tmp_path / "overlap.db"
    _set_rates(canary_run_db, db_path, rates)
    en, _de, _ = _build(db_path, tmp_path / "p")
    assert "What holds in every sample" not in en
    assert "No headline: no prompt class has stable cells to compare" in _headline(en)


def test_stable_pairs_are_the_headline_and_not_repeated(canary_run_db, tmp_path):  # noqa: F811
    db_path = tmp_path / "stable.db"
    _set_rates(canary_run_db, db_path, _rates())
    en, _de, run_id = _build(db_path, tmp_path / "p")
    assert "What holds in every sample" not in en
    assert queries.run_view(open_store(db_path, mode="ro").db, run_id)["every_sample"] == []


def test_a_lone_stable_cell_is_not_read_as_a_winner(canary_run_db, tmp_path):  # noqa: F811
    """tiny-b · short spreads by 3: tiny-a is the only stable cell of short, and the line says so."""
    db_path = tmp_path / "lone.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__short__off": [100.0, 100.0, 300.0]}))
    en, de, _ = _build(db_path, tmp_path / "p")
    line = next(ln for ln in _headline(en).splitlines() if ln.startswith("- **short**"))
    assert "**tiny-a** 52.5 tok/s — the only stable cell of this class: nothing to compare it with" in line, line
    assert "die einzige stabile Zelle dieser Klasse" in de


def test_the_ratio_footnote_only_where_a_ratio_is_stated(canary_run_db, tmp_path):  # noqa: F811
    """short: tiny-b unstable (tiny-a alone); medium: the ranges overlap. No × anywhere, so no word about ×."""
    db_path = tmp_path / "noratio.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__short__off": [100.0, 100.0, 300.0],
                                                 "tiny-a__medium__off": [95.0, 100.0, 105.0]}))
    en, _de, _ = _build(db_path, tmp_path / "p")
    head = _headline(en)
    assert "×" not in head and "no measurable difference between" in head
    assert "× is the ratio of medians" not in head
    db_path2 = tmp_path / "ratio.db"
    _set_rates(canary_run_db, db_path2, _rates(**{"tiny-b__short__off": [100.0, 100.0, 300.0]}))
    en2, _de2, _ = _build(db_path2, tmp_path / "p2")
    assert "× is the ratio of medians" in _headline(en2)  # medium still compares the two with a ratio
