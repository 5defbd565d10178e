"""The Findings section of a run article, and what ``cardproof publish`` records of it.

Real parts: generated stores (tests/findings_data.py), the real report step and the real ``cardproof
publish`` command. The site's ``mkdocs build`` is left out (``run_mkdocs``: it turns the same Markdown into
HTML and is tested elsewhere); the Markdown and its links are checked here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from cardproof.report import build as build_mod
from cardproof.report.build import build

from findings_data import SEED_NINE, M, make_run, shape


@pytest.fixture(autouse=True)
def no_mkdocs(monkeypatch):
    monkeypatch.setattr(build_mod, "mkdocs_build", lambda project: Path(project) / "build" / "site")


def _page(project: Path, name: str, lang: str) -> str:
    return (project / "site" / "runs" / (f"{name}.md" if lang == "en" else f"{name}.{lang}.md")).read_text()


def _section(article: str, title: str) -> str:
    return next(part for part in re.split(r"\n## ", article) if part.startswith(title))


def test_the_seed_article_states_its_findings_each_figure_linked_to_its_evidence(tmp_path):
    db = tmp_path / "seed.db"
    rid = make_run(db, SEED_NINE)
    project = tmp_path / "proj"
    build(db, project, run_mkdocs=False)
    for lang, title, numbers in (("en", "Findings", "The numbers"), ("de", "Befunde", "Die Zahlen")):
        article = _page(project, f"run-{rid}", lang)
        assert article.index("\n## " + title) < article.index("\n## " + numbers)
        section = _section(article, title)
        headings = re.findall(r"^### (.+)$", section, re.M)
        if lang == "en":
            assert headings[:2] == ["Architecture explains speed", "Quantisation ladder not controlled"]
            assert "Why it is stated:" in section and "What limits it:" in section
        else:
            assert headings[0] == "Die Architektur erklärt das Tempo" and "Was ihn einschränkt:" in section
        evidence = _page(project, f"run-{rid}-evidence", lang)
        links = re.findall(rf"\]\(run-{rid}-evidence\.md#([a-z]+-\d+)\)", section)
        assert links
        for anchor in set(links):  # every figure a reader follows lands on its row
            assert f'id="{anchor}"' in evidence, anchor
        for anchor in set(re.findall(r"\]\(#(fig-load-\d+|fit-\d+)\)", section)):
            assert f'id="{anchor}"' in article, anchor
    headline = _page(project, f"run-{rid}", "en").index("## Headline")
    assert headline < _page(project, f"run-{rid}", "en").index("## Findings")
    # a campaign of reasoning = [false]: the section says so, not that a comparison was left unmeasured
    for lang, title, said in (("en", "Reasoning on and off", "Reasoning was off in every cell this run measured"),
                              ("de", "Reasoning an und aus", "Reasoning war in jeder Zelle dieses Laufs aus")):
        section = _section(_page(project, f"run-{rid}", lang), title)
        assert said in section and "Not measured" not in section and "Nicht gemessen" not in section, section


def test_a_run_without_findings_has_no_section(tmp_path):
    db = tmp_path / "plain.db"
    rid = make_run(db, [M("a", {"quantisation": "Q4_K_M"}, decode=50.0), M("b", {"quantisation": "Q4_K_M"},
                                                                              decode=49.0)])
    project = tmp_path / "proj"
    build(db, project, run_mkdocs=False)
    article = _page(project, f"run-{rid}", "en")
    assert "## Findings" not in article and "## Befunde" not in _page(project, f"run-{rid}", "de")


def test_a_published_finding_that_changes_gets_an_addendum_quoting_it_in_both_languages(tmp_path):
    ladder = [M(f"smol-{q.lower()}", shape("llama", q, 0.135, bits=b, basename="SmolLM2", tokenizer="smol"),
                decode=d) for q, b, d in (("Q8_0", 8.5, 50.0), ("Q4_1", 5.0, 80.0))]
    db = tmp_path / "ladder.db"
    rid = make_run(db, ladder)
    project = tmp_path / "proj"
    result = CliRunner().invoke(cli, ["publish", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 0, result.output
    store = open_store(db, mode="ro")
    value, shown = store.db.execute("select value, shown_json from published_figures where run_id = ? and key = ?",
                                    [rid, "finding:ladder:smol-q4_1|smol-q8_0"]).fetchone()
    store.close()
    shown = json.loads(shown)
    assert value == shown["shown"]["en"] and re.search(r"×1\.[56]\d", value)
    assert shown["label"] == {"en": "Findings: Quantisation ladder", "de": "Befunde: Quantisierungsleiter"}
    # a correction: the Q4_1's samples were taken with another build and are measured again slower
    store = open_store(db)
    with store.db.conn:
        store.db.execute("update samples set decode_tps = decode_tps * 0.8 where cell_id in (select cells.id from cells "
                         "join models on models.id = model_id where models.name = 'smol-q4_1')")
    store.close()
    build(db, project, run_mkdocs=False)
    for lang in ("en", "de"):
        addenda = _page(project, f"run-{rid}", lang).split("{#addenda}", 1)[1]
        line = next(ln for ln in addenda.splitlines() if shown["label"][lang] in ln)
        published = shown["shown"][lang]
        assert published.split(":", 1)[1].strip()[:60] in line.replace("\\", "")  # the published words, quoted
