"""The run article states only findings: measured loads, stable cells, one caveat box per rule.

Built from a real run against the real llama-server, stored in real SQLite.
Where a test needs a noisy cell it multiplies one stored sample's decode rate
in that database (a real run's spread is whatever the machine gives) and
says so; everything else is as the run stored it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.campaign.check import CampaignError
from cardproof.daemon.store import open_store
from cardproof.report import queries
from cardproof.report.i18n import Lang
from conftest import CANARY_CONSOLE, canary_campaign_text
from test_memory_reconcile import seed_run  # noqa: F401  (recorded NVML readings of a seed run)


CONSOLE = CANARY_CONSOLE  # the runner's console lines of the canary run (tests/conftest.py)
_text = canary_campaign_text


def _build(db: Path, project: Path) -> tuple[str, str, int]:
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    run_id = open_store(db, mode="ro").db.execute("select max(id) from runs").fetchone()[0]
    runs = project / "site" / "runs"
    return (runs / f"run-{run_id}.md").read_text(), (runs / f"run-{run_id}.de.md").read_text(), run_id


def _row(article: str, model: str) -> str:
    """The model's first row in the main table (the first table of the article)."""
    start = re.search(r"^\| Modell? \|", article, flags=re.M).start()
    table = article[start:article.index("\n\n", start)]
    return next(ln for ln in table.splitlines() if ln.startswith(f"| {model}"))


def test_load_column_counts_measured_loads_only(canary_run_db, tmp_path):
    db = open_store(canary_run_db, mode="ro").db
    canary_loads = list(db.query(
        "select loads.* from loads join samples on samples.id = loads.sample_id where samples.kind = 'canary'"))
    assert canary_loads, "the load_time canary reloads a model inside its request"
    en, de, run_id = _build(canary_run_db, tmp_path / "p")
    view = queries.run_view(db, run_id)
    for m in view["models"]:
        measured = [ld["load_seconds"] for ld in db.query(
            "select load_seconds from loads join models on models.id = model_id where run_id = ? and "
            "models.name = ? and trigger = 'explicit' and origin is null and load_seconds is not null",
            [run_id, m["name"]])]
        assert m["load"] is not None and m["load"].n == len(measured)
        assert sorted([m["load"].low, m["load"].high]) == [min(measured), max(measured)]
        for text, lang in ((en, "en"), (de, "de")):
            L = Lang(lang)
            row = _row(text.replace("| tiny-a (pinned)", "| tiny-a"), m["name"])
            expected = f"{L.num(m['load'].median, 2)}<br><small>{L.num(min(measured), 2)}–" \
                       f"{L.num(max(measured), 2)} · n={len(measured)}</small>"
            assert expected in row, (lang, row)
    canary_models = {ld["model_id"] for ld in canary_loads}
    # the canary's reload is in the loads table of the article, but in no model's figure
    assert all(ld["id"] not in {x["id"] for m in view["models"] for x in m["loads"] if x["measured"]}
               for ld in canary_loads) and canary_models


def _set_rates(src: Path, dst: Path, rates: dict) -> None:
    """Copy the real run's database and give each measured cell fixed decode rates.

    ``rates``: (model, class, reasoning) -> a base rate, or a list of rates
    for the cell's answered samples in order. A base rate gives the samples
    base × 1.0, 1.05, 1.1, ... (a spread of 1.1, stable under any limit).
    """
    shutil.copy(src, dst)
    store = open_store(dst)
    db = store.db
    for cid, model, cls, reasoning in db.execute(
            "select cells.id, name, prompt_class, reasoning from cells join models on models.id = model_id "
            "where coalesce(kind, 'measure') = 'measure'").fetchall():
        want = rates[(model, cls, bool(reasoning))]
        ids = [r[0] for r in db.execute("select id from samples where cell_id = ? and error_kind is null "
                                        "order by id", [cid])]
        values = want if isinstance(want, list) else [want * (1 + 0.05 * i) for i in range(len(ids))]
        for sid, v in zip(ids, values):
            db.execute("update samples set decode_tps = ? where id = ?", [v, sid])
        # the fixed rates are the cell's valid samples: a gate the real run happened to fire on one of them
        # (a busy machine's cache hit or length stop) would leave the rest, another cell and another median
        db.execute(f"delete from gate_results where sample_id in ({','.join('?' * len(ids))})", ids)
    db.conn.commit()
    store.close()


def _rates(**override) -> dict:
    base = {("tiny-b", c, r): 100.0 for c in ("short", "medium") for r in (False, True)}
    base |= {("tiny-a", c, r): 50.0 for c in ("short", "medium") for r in (False, True)}
    return base | {(k.split("__")[0], k.split("__")[1], k.endswith("__on")): v for k, v in override.items()}


def test_unstable_cell_is_marked_and_kept_out_of_the_headline(canary_run_db, tmp_path):
    """The real run's decode rates are replaced by fixed ones (on two shared cores a tiny model's 8-token
    rates spread by any factor): tiny-b · short spreads by 3 against the campaign's limit of 2.0,
    tiny-b · medium by 1.8 (noisy at the default 1.5, not at 2.0)."""
    db_path = tmp_path / "noisy.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__short__off": [100.0, 100.0, 300.0],
                                                 "tiny-b__medium__off": [100.0, 100.0, 180.0]}))
    db = open_store(db_path, mode="ro").db

    def cell(cls):
        return db.execute("select cells.id from cells join models on models.id = model_id where name = 'tiny-b' "
                          "and prompt_class = ? and reasoning = 0 and coalesce(kind, 'measure') = 'measure'",
                          [cls]).fetchone()[0]

    short, medium = cell("short"), cell("medium")
    en, de, run_id = _build(db_path, tmp_path / "p")
    view = queries.run_view(open_store(db_path, mode="ro").db, run_id)
    assert view["unstable_ratio"] == 2.0
    assert [c["id"] for c in view["unstable_cells"]] == [short]
    row = _row(en, "tiny-b")
    assert re.search(rf"#cell-{short}\)<br><small>[^|]*</small> <small>\*\*unstable\*\*</small>", row), row
    assert not re.search(rf"#cell-{medium}\)<br><small>[^|]*</small> <small>\*\*unstable", row), row
    assert "**instabil**" in _row(de, "tiny-b")
    head = en[en.index("## Headline"):en.index("## The numbers")]
    assert "Left out as unstable: tiny-b · short" in head
    short_line = next((ln for ln in head.splitlines() if ln.startswith("- **short**")), "")
    assert "tiny-b" not in short_line
    assert all(r["best_cell"]["id"] != short and (r["other_cell"] or {}).get("id") != short
               for r in view["headline"]["rows"])
    # one caveat names it, in both languages; the chart data marks it
    assert en.count('!!! warning "Unstable cells"') == 1 and de.count('!!! warning "Instabile Zellen"') == 1
    assert f"[{Lang('en').num(view['cells'][[c['id'] for c in view['cells']].index(short)]['decode'].median)}]" \
           f"(run-{run_id}-evidence.md#cell-{short}) **unstable**" in en


def test_caveats_appear_once_per_rule(canary_run_db, tmp_path):
    en, de, _ = _build(canary_run_db, tmp_path / "p")
    for text in (en, de):
        titles = re.findall(r'^!!! \w+ "([^"]+)"', text, flags=re.M)
        assert titles and len(titles) == len(set(titles)), titles
    # both tiny models ignore the reasoning switch: one box lists both, and the on/off chart shows neither
    box = en[en.index('"The reasoning switch did not take"'):]
    box = box[:box.index("\n\n")]
    assert "tiny-a" in box and "tiny-b" in box
    section = en[en.index("## Reasoning on and off"):]
    section = section[:section.index("\n## ")]
    assert "![" not in section and "Not shown as an effect:" in section


@pytest.mark.parametrize("value, fragment", [
    ("1.0", "report.unstable_ratio"), ('"wide"', "report.unstable_ratio"), ("1e400", "report.unstable_ratio"),
    ("500", "report.unstable_ratio"),
])
def test_unstable_ratio_is_validated(value, fragment):
    with pytest.raises(CampaignError) as exc:
        parse_campaign(_text("http://127.0.0.1:1", f"\n[report]\nunstable_ratio = {value}\n"), "bad.toml")
    assert fragment in str(exc.value) and "bad.toml" in str(exc.value)


def test_unknown_report_key_is_named():
    with pytest.raises(CampaignError) as exc:
        parse_campaign(_text("http://127.0.0.1:1", "\n[report]\nunstabel_ratio = 2\n"), "bad.toml")
    assert "report.unstabel_ratio" in str(exc.value)


def test_default_unstable_ratio():
    assert parse_campaign(_text("http://127.0.0.1:1"), "ok.toml").unstable_ratio == 1.5


def test_overlapping_medians_are_no_measurable_difference(canary_run_db, tmp_path):
    """Fixed rates as above: on medium, tiny-b 100–110 against tiny-a 95–105 overlap; on short they do not."""
    db_path = tmp_path / "close.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-a__medium__off": [95.0, 100.0, 105.0]}))
    en, de, _ = _build(db_path, tmp_path / "p")
    head = en[en.index("## Headline"):en.index("## The numbers")]
    lines = {ln.split("**")[1]: ln for ln in head.splitlines() if ln.startswith("- **")}
    assert "no measurable difference between **tiny-b**" in lines["medium"] and "×" not in lines["medium"]
    assert "×2.00" in lines["short"] and "no measurable" not in lines["short"]
    assert "kein messbarer Unterschied zwischen **tiny-b**" in de


def test_agreeing_classes_are_one_sentence_with_each_ratio(canary_run_db, tmp_path):
    db_path = tmp_path / "agree.db"
    _set_rates(canary_run_db, db_path, _rates())
    en, de, _ = _build(db_path, tmp_path / "p")
    head = en[en.index("## Headline"):en.index("## The numbers")]
    assert "**tiny-b** is the fastest on every prompt class, against **tiny-a** (pinned): " \
           "short ×2.00 (×1.82–2.20), medium ×2.00 (×1.82–2.20)" in head


def test_console_gate_line_states_the_article_counts(canary_run_db, tmp_path):
    """The runner's end-of-run line counts measured samples, canaries apart, like the article's gate table."""
    line = next(ln for ln in CONSOLE if ln.startswith("gates over "))
    en, _de, run_id = _build(canary_run_db, tmp_path / "p")
    db = open_store(canary_run_db, mode="ro").db
    n_measured = db.execute("select count(*) from samples where run_id = ? and kind = 'measure' "
                            "and error_kind is null", [run_id]).fetchone()[0]
    assert line.startswith(f"gates over {n_measured} measured samples: ")
    fired = re.findall(r"(\w+) fired on (\d+)/(\d+)", line)
    assert fired, line  # length_limit fires on 8-token answers
    for gate, f, j in fired:
        assert re.search(rf"^\| `{gate}` \| [^|]+ \| {f}/{j}", en, flags=re.M), (gate, f, j)
    canary_fired = db.execute("select count(*) from canaries where run_id = ? and result = 'fired'",
                              [run_id]).fetchone()[0]
    assert canary_fired and f"canaries apart: fired {canary_fired} (" in line


def test_lead_names_hardware_models_context_and_classes(canary_run_db, tmp_path):
    en, de, run_id = _build(canary_run_db, tmp_path / "p")
    db = open_store(canary_run_db, mode="ro").db
    lead = en[en.index("How fast does each model"):en.index("## Headline")]
    assert "**CPU only**" in lead  # the test machine has no NVIDIA driver
    build = db.execute("select server_build from runs where id = ?", [run_id]).fetchone()[0]
    assert build and build in lead
    ctx = {n: int(v) for n, v in db.execute(
        "select models.name, facts.value_num from facts join loads on loads.id = facts.load_id "
        "join models on models.id = loads.model_id where facts.name = 'ctx_size' and loads.run_id = ?", [run_id])}
    assert set(ctx) == {"tiny-a", "tiny-b"}
    for name, n_ctx in ctx.items():
        size = Lang("en").size(db.execute("select file_bytes from models where name = ?", [name]).fetchone()[0])
        assert re.search(rf"\*\*{name}\*\*[^;]*[(, ]{re.escape(size)}, context [^)]*{Lang('en').num(n_ctx, 0)}", lead), lead
    toks = db.execute("select min(prompt_tokens), max(prompt_tokens) from samples join cells on cells.id = cell_id "
                      "where samples.run_id = ? and prompt_class = 'medium' and samples.kind = 'measure'",
                      [run_id]).fetchone()
    n = Lang("en").num
    assert f"medium ({n(toks[0], 0)}–{n(toks[1], 0)} prompt tokens)" in lead  # thousands separators
    assert "3/2 repetitions per cell" in lead or "2/3 repetitions per cell" in lead
    assert "Gemessen auf **nur CPU**" in de


def test_article_html_stays_under_250_kb_for_9_models_6_cells_5_reps(tmp_path):
    """Synthetic numbers from bench/report_build.py's generator (a size budget needs no server):
    one run of 9 models x 6 cells x 5 repetitions, built with mkdocs --strict."""
    import importlib.util

    from cardproof.report.build import build

    spec = importlib.util.spec_from_file_location(
        "report_build_bench", Path(__file__).resolve().parent.parent / "bench" / "report_build.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    db = tmp_path / "big.db"
    bench.generate(db, 1, 9)
    store = open_store(db)  # the generator's samples are CPU samples: keep them in the medians, as the demo does
    store.db.execute("update campaigns set toml_text = toml_text || ?", ["\n[gates.not_on_card]\nexclude = false\n"])
    for cid, text in store.db.execute("select id, toml_text from campaigns").fetchall():  # as if frozen so
        store.db.execute("update campaigns set campaign_json = ? where id = ?", [normalised_text(text), cid])
    store.db.conn.commit()
    store.close()
    assert open_store(db, mode="ro").db.execute(
        "select count(*) from samples where kind is null or kind = 'measure'").fetchone()[0] == 9 * 6 * 5
    out = build(db, tmp_path / "proj")["site_dir"]
    for lang in ("", "de"):
        runs = out / lang / "runs"
        article = next(p for p in (runs / "run-1" / "index.html", runs / "run-1.html") if p.exists())
        evidence = next(p for p in (runs / "run-1-evidence" / "index.html", runs / "run-1-evidence.html")
                        if p.exists())
        assert article.stat().st_size < 250_000, (lang, article.stat().st_size)
        html = article.read_text()
        assert 'id="sample-' in evidence.read_text() and 'id="sample-' not in html
        assert html.count('id="fig-cell-') == 9 * 6 and "<small>" in html  # every cell with its figure


def test_gates_at_a_glance(canary_run_db, tmp_path):
    """On CPU not_on_card fires on every measured sample: one sentence, not a link per cell; the gates
    that stayed quiet are listed once, each with its canary's sample on the evidence page."""
    en, de, run_id = _build(canary_run_db, tmp_path / "p")
    db = open_store(canary_run_db, mode="ro").db
    n = db.execute("select count(*) from gate_results join samples on samples.id = sample_id where "
                   "samples.run_id = ? and samples.kind = 'measure' and gate = 'not_on_card'", [run_id]).fetchone()[0]
    assert n and f"- `not_on_card`: fired on every measured sample ({n}/{n})." in en
    assert "- `not_on_card`: hat bei jeder Messung ausgelöst" in de
    quiet = en[en.index("### Gates that never fired in this run"):]
    quiet = quiet[:quiet.index("\n## ")]
    assert quiet.count("These gates never fired during the measurements.") == 1
    proofs = re.findall(rf"\]\(run-{run_id}-evidence\.md#sample-c(\d+)\)", quiet)
    canary_ids = {r[0] for r in db.execute("select sample_id from canaries where run_id = ? and sample_id is not null",
                                           [run_id])}
    assert proofs and {int(p) for p in proofs} <= canary_ids


def test_runs_index_states_each_headline_by_the_same_rule(canary_run_db, tmp_path):
    """Fixed rates as in the tests above: tiny-b ×2 over tiny-a on both classes, then an unstable cell."""
    db_path = tmp_path / "agree.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__medium__off": [100.0, 100.0, 300.0]}))
    project = tmp_path / "p"
    _build(db_path, project)
    index = (project / "site" / "runs" / "index.md").read_text()
    row = next(ln for ln in index.splitlines() if ln.startswith("| [1](run-1.md)"))
    # short: measurable; medium: tiny-b unstable, so tiny-a stands alone there
    assert "short: **tiny-b** ×1.82–2.20" in row and "medium: **tiny-a**" in row, row
    models = index[index.index("## Models across runs"):]
    line = next(ln for ln in models.splitlines() if ln.startswith("- **tiny-b**"))
    assert re.search(r"short \[105\.0\]\(run-1-evidence\.md#cell-\d+\), medium \[100\.0\]\(run-1-evidence\.md#cell-\d+\) "
                     r"\(unstable\) tok/s", line), line
    de = (project / "site" / "runs" / "index.de.md").read_text()
    assert "(instabil)" in de


def test_home_page_has_the_latest_headline_runs_and_comparisons(canary_run_db, tmp_path):
    """Fixed rates as above. The author's text on the home page stays; only the marked part is generated."""
    db_path = tmp_path / "agree.db"
    _set_rates(canary_run_db, db_path, _rates())
    project = tmp_path / "p"
    _build(db_path, project)
    home = (project / "site" / "index.md").read_text()
    assert home.startswith("# cardproof results")  # the scaffold's own text is kept
    part = home[home.index("<!-- cardproof:generated -->"):home.index("<!-- /cardproof:generated -->")]
    assert "- **test** — [Run 1](runs/run-1.md)" in part
    assert "**tiny-b** over tiny-a, every class: ×1.82–2.20, ×1.82–2.20" in part
    assert re.search(r"^\| \[1\]\(runs/run-1\.md\) \| \d{4}-\d\d-\d\d [^|]+\| test \| \*\*tiny-b\*\*", part, flags=re.M)
    assert "## Comparisons" in part
    de = (project / "site" / "index.de.md").read_text()
    assert "## Neuestes Ergebnis je Kampagne" in de and "jede Klasse" in de
    # a second build replaces the part, never appends another
    _build(db_path, project)
    assert (project / "site" / "index.md").read_text().count("## Latest result per campaign") == 1


def test_figures_that_count_different_things_are_reconciled(canary_run_db, tmp_path):
    """The run captured the server's log: its load time (server clock) and the measured loads (client clock)
    stand together with what each counts, and tiny-a's draft acceptance in the answers against the log's."""
    en, de, run_id = _build(canary_run_db, tmp_path / "p")
    part = en[en.index("### Figures that count different things"):]
    db = open_store(canary_run_db, mode="ro").db
    view = queries.run_view(db, run_id)
    for m in view["models"]:
        assert f"**Load time: two clocks** — {m['name']}: {Lang('en').num(m['load'].median, 2)} s on cardproof's " \
               f"clock" in part, part[:2000]
    assert "### Zahlen, die Verschiedenes zählen" in de and "Ladezeit: zwei Uhren" in de
    # here the log saw exactly the measured requests of tiny-a: the same count, nothing to reconcile
    answers = db.execute("select sum(draft_accepted), sum(draft_tokens) from samples where run_id = ? and "
                         "kind = 'measure' and draft_tokens > 0", [run_id]).fetchone()
    logged = [tuple(int(x) for x in t.split("/")) for (t,) in db.execute(
        "select value_text from facts where name = 'draft_acceptance' and load_id in "
        "(select id from loads where run_id = ?)", [run_id])]
    assert answers[1] and tuple(map(sum, zip(*logged))) == tuple(answers)
    assert "Draft acceptance: two counts" not in en
    # one answer whose counter says more than the log: both counts stand, each saying what it counts
    copy = tmp_path / "more.db"
    shutil.copy(canary_run_db, copy)
    store = open_store(copy)
    store.db.execute("update samples set draft_tokens = draft_tokens + 7 where id = (select min(id) from samples "
                     "where run_id = ? and kind = 'measure' and draft_tokens > 0)", [run_id])
    store.db.conn.commit()
    store.close()
    en2, _, _ = _build(copy, tmp_path / "p2")
    item = next(ln for ln in en2.splitlines() if ln.startswith("- **Draft acceptance: two counts** — tiny-a:"))
    assert f"of {answers[1] + 7} draft tokens accepted over" in item
    assert f"the server log counts {sum(a for a, _ in logged)} of {sum(g for _, g in logged)} over {len(logged)}" \
           in item and "canaries, probes and warm-ups included" in item


def test_rules_are_not_graded_on_the_incumbent_nor_read_from_an_unstable_cell(canary_run_db, tmp_path):
    """Fixed rates as above; tiny-b · medium spread by 3 (unstable at the campaign's 2.0)."""
    db_path = tmp_path / "rules.db"
    _set_rates(canary_run_db, db_path, _rates(**{"tiny-b__medium__off": [100.0, 100.0, 300.0]}))
    en, de, _ = _build(db_path, tmp_path / "p")
    section = en[en.index("## Decision"):]
    section = section[:section.index("\n## ")]

    def outcome(rule, model):
        part = section[section.index(f"**{rule.replace('_', chr(92) + '_')}**"):]  # the name is escaped
        row = next(ln for ln in part.splitlines() if ln.startswith(f"| {model}"))
        return row.split("|")[2].strip()

    assert outcome("candidate_fast", "tiny-a") == "**not graded: incumbent**"
    assert outcome("candidate_fast", "tiny-b") != "**not graded: incumbent**"
    assert outcome("medium_fast", "tiny-b") == "**unstable**"
    assert outcome("medium_fast", "tiny-a") not in ("**unstable**", "**not graded: incumbent**")
    assert "nicht bewertet: Bestandsmodell" in de


def test_expectations_are_confirmed_or_refuted_with_the_deciding_figure(canary_run_db, tmp_path):
    """Fixed rates as above (tiny-b 100, 105, 110; tiny-a 50, 52.5, 55), then tiny-b · short made unstable."""
    db_path = tmp_path / "fixed.db"
    _set_rates(canary_run_db, db_path, _rates())
    en, de, run_id = _build(db_path, tmp_path / "p")
    section = en[en.index("## What the author expected"):]
    section = section[:section.index("\n## ")]
    below = section[section.index("**below\\_a\\_million**"):section.index("**above\\_a\\_million**")]
    above = section[section.index("**above\\_a\\_million**"):]
    for model, figure in (("tiny-b", "105.0"), ("tiny-a", "52.5")):
        assert f"- {model}: **confirmed** — decode.short = {figure}" in below, below
        assert f"- {model}: **refuted** — decode.short = {figure}" in above, above
    assert "## Was der Autor erwartete" in de and "**widerlegt**" in de
    noisy = tmp_path / "noisy.db"
    _set_rates(canary_run_db, noisy, _rates(**{"tiny-b__short__off": [100.0, 100.0, 300.0]}))
    en, _, _ = _build(noisy, tmp_path / "p2")
    assert en.count("- tiny-b: **unstable** — decode.short = 100.0") == 2  # decides neither expectation


def test_an_expectation_reads_the_incumbent_as_a_rule_does(canary_run_db, tmp_path):
    """An expectation written against the pinned model (``incumbent.decode.short``) is decided by the
    incumbent's figure, as the same text under [rules] is (it once read every incumbent value as missing
    and left each model undecided); an unstable incumbent cell decides nothing."""
    import hashlib

    from cardproof.daemon.campaign.frozen import normalised_text

    def with_expectation(db_path):
        store = open_store(db_path)
        text, cid = store.db.execute("select toml_text, campaigns.id from campaigns join runs on "
                                     "runs.campaign_id = campaigns.id order by runs.id desc").fetchone()
        text = text.replace("[expectations]\n", '[expectations]\nbeats_incumbent = '
                            '"pinned or decode.short > incumbent.decode.short"\n')
        with store.db.conn:
            store.db.execute("update campaigns set toml_text = ?, sha256 = ?, campaign_json = ? where id = ?",
                             [text, hashlib.sha256(text.encode()).hexdigest(), normalised_text(text), cid])
        store.close()

    def section(en):
        part = en[en.index("**beats\\_incumbent**"):]
        return part[:part.index("\n\n\n")]

    db_path = tmp_path / "fixed.db"
    _set_rates(canary_run_db, db_path, _rates())
    with_expectation(db_path)
    got = section(_build(db_path, tmp_path / "p")[0])
    assert "- tiny-b: **confirmed** — " in got and "incumbent.decode.short = 52.5" in got, got
    assert "- tiny-a: **confirmed** — pinned = true" in got, got
    assert "missing" not in got
    noisy = tmp_path / "noisy.db"
    _set_rates(canary_run_db, noisy, _rates(**{"tiny-a__short__off": [50.0, 50.0, 150.0]}))
    with_expectation(noisy)
    got = section(_build(noisy, tmp_path / "p2")[0])
    assert "- tiny-b: **unstable** — " in got, got


def test_expectations_are_validated_like_rules():
    with pytest.raises(CampaignError) as exc:
        parse_campaign(_text("http://127.0.0.1:1", "\n[expectations]\nx = \"decode.nonsense >\"\n"), "bad.toml")
    assert "expectations.x" in str(exc.value) and "bad.toml" in str(exc.value)


def test_rule_values_read_measured_loads_only(canary_run_db):
    """A rule's load_seconds is the Load column's figure: the canary's reload does not enter it."""
    from cardproof.daemon.campaign.model import parse_gates
    from cardproof.daemon.campaign.rules.facts import model_values

    db = open_store(canary_run_db, mode="ro").db
    run_id = db.execute("select max(id) from runs").fetchone()[0]
    view = queries.run_view(db, run_id)
    gates = parse_gates(view["run"]["campaign_text"], "frozen")
    canary_models = {r[0] for r in db.execute(
        "select models.name from loads join samples on samples.id = loads.sample_id join models on "
        "models.id = loads.model_id where samples.kind = 'canary' and loads.run_id = ?", [run_id])}
    assert canary_models
    for m in view["models"]:
        model_id = db.execute("select id from models where name = ?", [m["name"]]).fetchone()[0]
        assert model_values(db, run_id, model_id, gates)["load_seconds"] == m["load"].median


def test_memory_as_share_of_the_card_budget(seed_run):  # noqa: F811
    """Recorded NVML readings (no card on the test machine; the seed run of tests/test_memory_reconcile.py):
    the card figure beside the file size, what is not weights, and the share of the cards' memory."""
    from cardproof.report.build import _env
    from cardproof.report.memory import memory_view

    view = memory_view(seed_run["store"].db, seed_run["run_id"])
    row = view["loads"][0]
    row["file_bytes"] = 16 * 2**30
    L = Lang("en")
    en = _env().get_template("sections/memory.md.j2").render(_=L.gettext, L=L, memory=view, run={})
    card = row["card_mib"] / 1024
    share = row["card_mib"] / row["budget"]["total_mib"]
    expected = (f"| {row['model']} | {L.num(card, 2)} | 16.00 | {L.num(card - 16, 2)} | {L.pct(share, 1)} of "
                f"{L.num(row['budget']['total_mib'] / 1024, 2)} GiB | {L.num(row['budget']['headroom_mib'] / 1024, 2)} |")
    assert expected in en, en[:3000]


def test_every_cell_unstable_says_why_there_is_no_headline(canary_run_db, tmp_path):
    """Fixed rates again: every measured cell spreads by 3 against the campaign's limit of 2.0. The samples
    are valid, so the article must not say there were none; it says why no headline is stated."""
    db_path = tmp_path / "all-noisy.db"
    _set_rates(canary_run_db, db_path, {k: [100.0, 100.0, 300.0] for k in _rates()})
    en, de, run_id = _build(db_path, tmp_path / "p")
    head = en[en.index("## Headline"):en.index("## The numbers")]
    assert "No valid sample" not in head
    assert "No headline: no prompt class has stable cells to compare" in head and "2.00 times" in head
    assert "Kein Ergebnis in einem Satz: Keine Prompt-Klasse hat stabile Zellen" in de and "2,00-mal" in de
