"""``cardproof publish`` records what the site put out; a later change shows as Addenda, never silently.

Real parts: a run measured against the real llama-server into a real SQLite
store, the real ``cardproof publish`` command (click) and ``report build``
with ``mkdocs build --strict``. The change between publications is a real
reclassification: an excluding gate's result on the median sample set to
fired, as a re-judged run would store it.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.queries import run_view
from conftest import campaign_text


@pytest.fixture(scope="module")
def measured(llama_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("publish")
    db_path = root / "p.db"
    store = open_store(db_path)
    text = campaign_text(llama_server.url, models=("tiny-a",), classes=("short",), reps=3, max_tokens=8)
    text += "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
    run_id = run_campaign(store, parse_campaign(text, "p.toml"), echo=lambda s: None).run_id
    store.close()
    return root, db_path, run_id


def _publish(db_path, project, *extra):
    return CliRunner().invoke(cli, ["publish", "--db", str(db_path), "--project", str(project), *extra])


def _article(project, run_id, lang):
    name = f"run-{run_id}.md" if lang == "en" else f"run-{run_id}.{lang}.md"
    return (project / "site" / "runs" / name).read_text()


def _reclassify_median(db_path, run_id) -> int:
    """Exclude the sample the decode median is, as a re-judging that saw a load inside it would."""
    store = open_store(db_path)
    view = run_view(store.db, run_id)
    cell = next(c for c in view["cells"] if len(c["valid"]) == 3)
    (sample_id,) = cell["median_ids"]
    store.db.execute("update gate_results set fired = 1, observed_text = 'reclassified' "
                     "where sample_id = ? and gate = 'load_time'", [sample_id])
    store.db.conn.commit()
    store.close()
    return sample_id


def test_a_changed_figure_shows_what_was_published_what_replaced_it_and_why(measured, tmp_path):
    root, db_path, run_id = measured
    project = tmp_path / "proj"
    first = _publish(db_path, project)
    assert first.exit_code == 0, first.output
    assert re.search(r"publication 1: \d+ figures recorded; site built: ", first.output)
    assert "{#addenda}" not in _article(project, run_id, "en")

    sample_id = _reclassify_median(db_path, run_id)
    # a build before the next publication already says the published median no longer holds
    build(db_path, project)
    en = _article(project, run_id, "en")
    assert "## Addenda {#addenda}" in en and "this build, not yet published" in en
    assert f"samples left out since: [{sample_id}](run-{run_id}-evidence.md#sample-{sample_id})" in en
    assert "tiny-a · short · reasoning off: decode median" in en

    note = "sample <b>rejudged</b>: a load ran inside it"
    second = _publish(db_path, project, "--note", note)
    assert second.exit_code == 0, second.output
    en, de = _article(project, run_id, "en"), _article(project, run_id, "de")
    assert "this build, not yet published" not in en
    line = next(ln for ln in en.splitlines() if "decode median" in ln)
    # published value, its replacement, both times, and the author's note (escaped: no markup)
    assert re.search(r"published \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC as [\d,.]+ tok/s \(n=3\); since "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: [\d,.]+ tok/s \(n=2\)", line), line
    assert "<b>" not in line and "rejudged" in line
    assert "## Nachträge {#addenda}" in de
    de_line = next(ln for ln in de.splitlines() if "Decode-Median" in ln)
    # German figures with a decimal comma (a point only groups thousands)
    assert re.search(r"veröffentlicht .* als [\d.]+,\d Tok\./s \(n=3\); seit .*: [\d.]+,\d Tok\./s \(n=2\)", de_line)

    # nothing published is rewritten away: a third publication without change keeps the addendum
    third = _publish(db_path, project)
    assert third.exit_code == 0, third.output
    assert _article(project, run_id, "en").count("decode median") == line.count("decode median") and \
        "rejudged" in _article(project, run_id, "en")
    site = project / "build" / "site"
    assert "Addenda" in (site / "runs" / f"run-{run_id}.html").read_text()
    assert "Nachträge" in (site / "de" / "runs" / f"run-{run_id}.html").read_text()


def test_publish_refuses_an_empty_note_and_a_missing_database(tmp_path):
    result = _publish(tmp_path / "none.db", tmp_path / "proj", "--note", "  ")
    assert result.exit_code == 2 and "--note: empty" in result.output
    result = _publish(tmp_path / "none.db", tmp_path / "proj")
    assert result.exit_code == 1 and "none.db" in result.output
    assert not (tmp_path / "none.db").exists()
