"""The Quality section and finding of a run article, in both languages, with the Pareto chart.

Real parts: a generated store (tests/findings_data.py) whose ladder is then measured by the real
``[quality]`` code (``daemon/quality/run.measure``) with a stand-in for llama-perplexity that prints
the real tool's recorded output (tests/fixtures/llama_perplexity: SmolLM2's Q4_1 against its F16), so
the rows, lines and facts are stored as a run stores them; the real report step renders the article.
"""

from __future__ import annotations

import re
import sqlite3
import stat
from pathlib import Path

import pytest

from cardproof.daemon.run.quality import measure
from cardproof.daemon.campaign.tables.quality import QualitySettings
from cardproof.daemon.store import open_store
from cardproof.report import build as build_mod
from cardproof.report.build import build
from findings_data import M, make_run, shape

FIXTURES = Path(__file__).parent / "fixtures" / "llama_perplexity"


@pytest.fixture(autouse=True)
def no_mkdocs(monkeypatch):
    monkeypatch.setattr(build_mod, "mkdocs_build", lambda project: Path(project) / "build" / "site")


def _stand_in(folder: Path) -> Path:
    """Prints what the real llama-perplexity printed: the base run's lines, or a --kl-divergence run's."""
    tool = folder / "llama-perplexity"
    tool.write_text(f'#!/bin/sh\ncase " $* " in *" --kl-divergence "*) cat "{FIXTURES / "kld-q4_1-vs-f16.txt"}";; '
                    f'*) cat "{FIXTURES / "base-f16.txt"}";; esac\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def _ladder_run(tmp_path: Path, requantized: bool = True, without: tuple[str, ...] = ()) -> tuple[Path, int]:
    def smol(quant, bits, decode, made=requantized):
        s = shape("llama", quant, 0.135, bits=bits, basename="SmolLM2", tokenizer="smollm2")
        return s | ({"requantized_from": "smollm2-q4_1"} if made else {})
    models = [M("smollm2-f16", smol("F16", 16.0, 0), decode=60.0, pinned=True),
              M("smollm2-q8_0", smol("Q8_0", 8.5, 0), decode=95.0),
              M("smollm2-q4_1", smol("Q4_1", 5.0, 0, made=False), decode=120.0)]
    models = [m for m in models if m.name not in without]
    db = tmp_path / "q.db"
    rid = make_run(db, models, extra="[quality]\n")
    store = open_store(db)
    ids = dict(store.db.execute("select name, id from models").fetchall())
    for name in ids:  # the files the measurement reads: any file here, the stand-in does not open it
        f = tmp_path / f"{name}.gguf"
        f.write_bytes(b"GGUF")
        store.db.execute("update models set path = ? where id = ?", [str(f), ids[name]])
    store.db.conn.commit()
    measure(store, run_id=rid, settings=QualitySettings(), model_ids=ids, models=list(ids), variants=[],
            requantized={k: v for k, v in {"smollm2-f16": "smollm2-q4_1", "smollm2-q8_0": "smollm2-q4_1"}.items()
                         if k in ids} if requantized else {},
            echo=lambda _: None,
            binary=_stand_in(tmp_path))
    store.close()
    return db, rid


def _section(article: str, title: str) -> str:
    return next(part for part in re.split(r"\n## ", article) if part.startswith(title))


def test_the_article_shows_quality_beside_speed_with_finding_chart_and_caveat(tmp_path):
    db, rid = _ladder_run(tmp_path)
    conn = sqlite3.connect(db)
    assert [r[0] for r in conn.execute("select status from quality_checks order by position")] == ["measured"] * 3
    project = tmp_path / "proj"
    build(db, project, run_mkdocs=False)
    site = project / "site" / "runs"
    for lang, title, finding, base_word, caveat in (
            ("en", "Quality: what each format costs in answers", "### Quality beside speed", "(base)",
             "measure rounding between files that carry the same weights"),
            ("de", "Qualität: was jedes Format an Antworten kostet", "### Qualität neben Tempo", "(Basis)",
             "messen das Runden zwischen Dateien, die dieselben Gewichte tragen")):
        article = (site / f"run-{rid}{'' if lang == 'en' else '.de'}.md").read_text()
        section = _section(article, title)
        assert f"smollm2-f16 {base_word}" in section and caveat in section, section[:2000]
        # Q4_1's figures as llama-perplexity printed them, each linked to its line on the evidence page
        kld = "0.002872 ± 0.000067" if lang == "en" else "0,002872 ± 0,000067"
        m = re.search(r"\[" + re.escape(kld) + r"\]\(run-\d+-evidence\.md#line-(\d+)\)", section)
        assert m, section[:3000]
        evidence = (site / f"run-{rid}-evidence{'' if lang == 'en' else '.de'}.md").read_text()
        assert f'id="line-{m.group(1)}"' in evidence
        line = conn.execute("select raw from log_lines where id = ?", [int(m.group(1))]).fetchone()[0]
        assert line.startswith("Mean    KLD:   0.002872 ±")
        # decode beside it, linked to its cell; the Pareto chart of three points with its data table
        assert re.search(r"\| \[1[12]\d[.,]\d\]\(run-\d+-evidence\.md#cell-\d+\) \|", section), section[:3000]
        (chart,) = re.findall(r"\(img/(run-\d+-quality-0-" + lang + r"\.svg)\)", section)
        assert (project / "build" / "site" / "runs" / "img" / chart).exists() or (site / "img" / chart).exists()
        findings = _section(article, "Findings" if lang == "en" else "Befunde")
        assert finding in findings
        assert "smollm2-q4\\_1 (Q4\\_1): " in findings and "×2" in findings, findings
    en = (site / f"run-{rid}.md").read_text()
    assert "What these figures do not show" in en and "was itself requantized from smollm2-q4\\_1" in en
    # the setup names the command each quality load ran (llama-perplexity, as stored), not a missing server line
    setup = _section(en, "Setup")
    quality_loads = [r[0] for r in conn.execute("select load_id from quality_checks where load_id is not null")]
    assert quality_loads
    for load_id in quality_loads:
        (line,) = [ln for ln in setup.splitlines() if f"#load-{load_id})" in ln]
        assert "llama-perplexity for the quality measurement, no server:" in line and "--kl-divergence" in line, line
    # the ladder beside a quality finding does not say quality goes unmeasured: it says what the KLD here is
    ladder = _section(en, "Findings").split("### Quantisation ladder", 1)[1].split("\n### ", 1)[0]
    assert "not what it costs in quality" not in ladder, ladder
    assert "measures only the rounding between these formats" in ladder, ladder


def test_a_ladder_of_original_files_gets_the_general_caveat_and_the_ladder_points_to_it(tmp_path):
    db, rid = _ladder_run(tmp_path, requantized=False)
    project = tmp_path / "proj"
    build(db, project, run_mkdocs=False)
    article = (project / "site" / "runs" / f"run-{rid}.md").read_text()
    findings = _section(article, "Findings")
    assert "KL divergence over one English literary text at one context size shows" in findings
    assert "Requantized base" not in article and "was itself requantized" not in article
    # the ladder finding no longer says quality is not measured: it points to the quality finding
    assert "what each step costs in the answers is measured in the finding Quality beside speed" in findings
    assert "is not measured here" not in findings
    # llama-perplexity's processes are loads of their own, but no memory measurement of a served model
    memory = _section(article, "Memory").split("### Memory on the card", 1)[1]
    assert "load-4" not in memory and "load-6" not in memory


def test_one_member_is_said_in_the_singular_without_a_range(tmp_path):
    """The demo measures one member against its base: no "from x to x", no plural verb."""
    db, rid = _ladder_run(tmp_path, without=("smollm2-q8_0",))
    project = tmp_path / "proj"
    build(db, project, run_mkdocs=False)
    article = (project / "site" / "runs" / f"run-{rid}.md").read_text()
    text = _section(article, "Findings").split("### Quality beside speed", 1)[1].split("\n\n")[1]
    assert "smollm2-q4\\_1 keeps the base's top token at " in text and " to " not in text.split("shipped text")[1]
    assert "with a mean KL divergence of [" in text
