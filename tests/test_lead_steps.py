"""The lead of a run that starts a step says so, in both languages.

Generated multi-run databases with a known step at a known build change
(tests/history_data.py: real SQLite, synthetic levels, since a real server
cannot be made 12 % slower on demand), the real report build and templates.
"""

from __future__ import annotations

import shutil

from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.i18n import Lang
from cardproof.report.lead_steps import lead_sentences, steps_by_run, steps_print
from history_data import make_db

STEP = [{"level": 100.0, "build": "b7342"}] * 5


def _steps(path):
    store = open_store(path, mode="ro")
    try:
        return steps_by_run(store.db)
    finally:
        store.close()


def test_the_run_after_a_known_step_is_the_one_that_starts_it(tmp_path):
    ids = make_db(tmp_path / "h.db", STEP + [{"level": 88.0, "build": "b7401"}] * 4)
    starts = _steps(tmp_path / "h.db")
    assert set(starts) == {ids[5]}
    en = lead_sentences(starts[ids[5]], Lang("en"))
    de = lead_sentences(starts[ids[5]], Lang("de"))
    assert len(en) == len(de) == 1
    assert en[0].startswith("This run starts a step: decode of tiny-a (short · reasoning off) fell 1")
    assert f"against run [{ids[4]}](run-{ids[4]}.md) — see the [trend page](../trends/trend-nightly-tiny-a.md)." \
        in en[0]
    assert de[0].startswith("Dieser Lauf beginnt eine Stufe: Decode von tiny-a (kurz · Reasoning aus) sank "
                            f"gegenüber Lauf [{ids[4]}](run-{ids[4]}.md) um 1")
    assert "[Trendseite](../trends/trend-nightly-tiny-a.md)" in de[0] and "." not in de[0].split(" um ")[1][:6]


def test_no_step_no_sentence_and_no_key(tmp_path):
    make_db(tmp_path / "n.db", [{"level": 70.0, "build": "b1"}] * 4 + [{"level": 70.0, "build": "b2"}] * 4)
    assert _steps(tmp_path / "n.db") == {}
    assert lead_sentences(None, Lang("de")) == [] and steps_print(None) == ""


def test_the_article_says_it_once_a_later_run_confirms_the_step(tmp_path):
    """One run at the new level is no step yet; when two more are stored, the earlier article is built again."""
    project = tmp_path / "proj"
    ids = make_db(tmp_path / "a.db", STEP + [{"level": 88.0, "build": "b7401"}])
    build(tmp_path / "a.db", project, run_mkdocs=False)
    runs = project / "site" / "runs"
    first = runs / f"run-{ids[5]}.md"
    assert "This run starts a step" not in first.read_text()
    # the same runs and two later ones at the new level (make_db is deterministic per seed)
    more = make_db(tmp_path / "b.db", STEP + [{"level": 88.0, "build": "b7401"}] * 3)
    assert more[:6] == ids
    shutil.copy(tmp_path / "b.db", tmp_path / "a.db")
    build(tmp_path / "a.db", project, run_mkdocs=False)
    en, de = first.read_text(), (runs / f"run-{ids[5]}.de.md").read_text()
    assert "This run starts a step: decode of tiny-a (short · reasoning off) fell 1" in en
    assert "Dieser Lauf beginnt eine Stufe: Decode von tiny-a (kurz · Reasoning aus) sank" in de
    for rid in ids[:5] + more[6:]:
        assert "This run starts a step" not in (runs / f"run-{rid}.md").read_text()
