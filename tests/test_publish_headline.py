"""``cardproof publish`` records the headline the article stated, and an addendum quotes it word for word.

The demo's article said "no measurable difference between tiny-b and tiny-a" for a class, while the
publication recorded "tiny-b ×1.12 against tiny-a"; when a correction later made the difference
measurable, the Addenda quoted that ratio as published although no page had ever shown it.

Real parts: a generated store (bench/report_data.py: real rows in every table an article reads,
synthetic numbers), the real ``cardproof publish`` command and the real report step. The site's
``mkdocs build`` is left out (``run_mkdocs``: it turns the same Markdown into HTML and is tested
elsewhere); what is published and quoted is the Markdown checked here.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from cardproof.report import build as build_mod
from cardproof.report.build import build
from cardproof.report.mdsafe import esc


def _generator_module():
    spec = importlib.util.spec_from_file_location(
        "report_data_bench", Path(__file__).resolve().parent.parent / "bench" / "report_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# run 1: "short" no measurable difference (ranges overlap through one slow sample of model-01),
# "medium" left out as unstable; run 2: every cell unstable; run 3: interrupted
SHORT_00 = [50.0, 51.0, 52.0, 53.0, 54.0]
SHORT_01 = [60.0, 61.0, 62.0, 63.0, 48.0]


@pytest.fixture
def store_path(tmp_path):
    gen = _generator_module().Generator(tmp_path / "h.db", models=2, campaigns=1, log_lines=120)
    gen.add(3)
    store = open_store(gen.path)
    db = store.db
    with db.conn:
        def cell(run, model, cls):
            return db.execute("select cells.id from cells join models on models.id = model_id where run_id = ? "
                              "and models.name = ? and prompt_class = ? and reasoning = 0",
                              [run, model, cls]).fetchone()[0]

        for model, values in (("model-00", SHORT_00), ("model-01", SHORT_01)):
            ids = [r[0] for r in db.execute("select id from samples where cell_id = ? order by id",
                                            [cell(1, model, "short")])]
            for sid, v in zip(ids, values):
                db.execute("update samples set decode_tps = ? where id = ?", [v, sid])
            db.execute("update samples set decode_tps = decode_tps * repetition where cell_id = ?",
                       [cell(1, model, "medium")])
        db.execute("update samples set decode_tps = decode_tps * repetition where run_id = 2")
        db.execute("update runs set status = 'interrupted', exit_code = 130 where id = 3")
    store.close()
    return gen.path


@pytest.fixture(autouse=True)
def no_mkdocs(monkeypatch, tmp_path):
    monkeypatch.setattr(build_mod, "mkdocs_build", lambda project: Path(project) / "build" / "site")


def _publish(db_path, project, *extra):
    result = CliRunner().invoke(cli, ["publish", "--db", str(db_path), "--project", str(project), *extra])
    assert result.exit_code == 0, result.output
    return result


def _article(project, run_id, lang):
    return (project / "site" / "runs" / (f"run-{run_id}.md" if lang == "en" else f"run-{run_id}.{lang}.md")).read_text()


def _headline_section(text: str) -> str:
    """The article's Headline section as a reader sees its words: emphasis marks gone."""
    body = re.split(r"\n## ", text)
    section = next(part for part in body if part.startswith(("Headline", "Ergebnis in einem Satz")))
    return section.replace("**", "")


def _recorded(db_path, run_id, key):
    store = open_store(db_path, mode="ro")
    try:
        rows = store.db.execute("select value, shown_json from published_figures where run_id = ? and key = ? "
                                "order by id", [run_id, key]).fetchall()
    finally:
        store.close()
    return [(value, json.loads(shown)) for value, shown in rows]


def test_the_headline_is_recorded_as_the_article_stated_it(store_path, tmp_path):
    project = tmp_path / "proj"
    _publish(store_path, project)
    expected = {
        (1, "short", "en"): "no measurable difference between model-01 (61.0 tok/s) and model-00 (52.0 tok/s): "
                            "their ranges overlap",
        (1, "medium", "en"): "Left out as unstable: model-00 · medium; model-01 · medium.",
        (2, "short", "en"): "No headline: no prompt class has stable cells to compare",
        (3, "short", "en"): "No headline: the run did not finish.",
        (3, "short", "de"): "Kein Ergebnis in einem Satz: Der Lauf wurde nicht beendet.",
    }
    for (run_id, cls, lang), start in expected.items():
        ((value, shown),) = _recorded(store_path, run_id, f"headline:{cls}")
        assert shown["shown"][lang].startswith(start), (run_id, cls, shown)
        assert "×" not in shown["shown"][lang] and "against" not in shown["shown"][lang]
    # every recorded headline is a sentence the article shows, in each language
    for run_id in (1, 2, 3):
        for lang in ("en", "de"):
            section = _headline_section(_article(project, run_id, lang))
            for cls in ("short", "medium", "long"):
                ((_, shown),) = _recorded(store_path, run_id, f"headline:{cls}")
                assert shown["shown"][lang] in section, (run_id, cls, lang, shown["shown"][lang], section)
    ((value, shown),) = _recorded(store_path, 1, "headline:long")  # the measurable class keeps its ratio
    assert re.fullmatch(r"model-0[01]/model-0[01] \d+\.\d\d", value) and "×" in shown["shown"]["en"]


def test_an_addendum_quotes_the_published_wording_in_each_language(store_path, tmp_path):
    project = tmp_path / "proj"
    _publish(store_path, project)
    published = {lang: _headline_section(_article(project, 1, lang)) for lang in ("en", "de")}
    ((_, first),) = _recorded(store_path, 1, "headline:short")
    # the correction: the slow sample was a mistake; the two models' ranges no longer overlap
    store = open_store(store_path)
    with store.db.conn:
        store.db.execute("update samples set decode_tps = 64.0 where decode_tps = 48.0 and run_id = 1")
    store.close()
    build(store_path, project, run_mkdocs=False)
    for lang in ("en", "de"):
        quoted = str(esc(first["shown"][lang]))
        assert first["shown"][lang] in published[lang]  # what the page showed...
        addenda = _article(project, 1, lang).split("{#addenda}", 1)[1]
        line = next(ln for ln in addenda.splitlines() if quoted in ln)
        assert f" {quoted}; " in line, line  # ...is what the addendum says was published
        assert "×" not in line.split(quoted, 1)[0]  # no ratio stated as published
        assert "×" in line.split(quoted, 1)[1]  # since: the ratio the data now state
    assert first["shown"]["en"] == ("no measurable difference between model-01 (61.0 tok/s) and model-00 "
                                    "(52.0 tok/s): their ranges overlap")
    assert "kein messbarer Unterschied" in first["shown"]["de"]


def test_a_headline_recorded_by_an_older_cardproof_is_no_change_by_itself(store_path, tmp_path):
    """Before, a headline was recorded as "best/other ratio" whether or not the article called it
    measurable: such a record equals the data where they still give that ratio, so no addendum comes of
    the new way of recording alone."""
    project = tmp_path / "proj"
    _publish(store_path, project)
    store = open_store(store_path)
    with store.db.conn:
        value, shown = store.db.execute("select value, shown_json from published_figures "
                                        "where run_id = 1 and key = 'headline:short'").fetchone()
        assert value.startswith("no measurable difference")
        old = json.loads(shown)
        old.pop("form")
        old["shown"] = {"en": "model-01 ×1.17 against model-00", "de": "model-01 ×1,17 gegenüber model-00"}
        store.db.execute("update published_figures set value = 'model-01/model-00 1.17', shown_json = ? "
                         "where run_id = 1 and key = 'headline:short'", [json.dumps(old)])
    store.close()
    build(store_path, project, run_mkdocs=False)
    assert "{#addenda}" not in _article(project, 1, "en")
