"""``cardproof publish`` records what the site put out; a later change shows as Addenda, never silently.

Real parts: a run measured against the real llama-server into a real SQLite
store, the real ``cardproof publish`` command (click) and ``report build``
with ``mkdocs build --strict``. The change between publications is a real
reclassification: an excluding gate's result on the median sample set to
fired, as a re-judged run would store it.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import build
from cardproof.report.mdsafe import esc
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
    # "seit" takes the dative: since this build
    assert "; seit diesem Build, noch nicht veröffentlicht: " in _article(project, run_id, "de")
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


def test_publish_refuses_a_broken_contradictions_note_and_records_nothing(measured, tmp_path):
    """The author's contradictions are statements of the article: a file that cannot be read is named,
    and no publication is recorded from an article that could not be made."""
    _root, db_path, run_id = measured
    notes = tmp_path / "proj" / "notes"
    notes.mkdir(parents=True)
    path = notes / f"run-{run_id}.contradictions.toml"
    path.write_text('[[contradiction]]\nstatus = "maybe"\n')

    def publications():
        store = open_store(db_path, mode="ro")
        try:
            return store.db.execute("select count(*) from publications").fetchone()[0]
        finally:
            store.close()

    before = publications()
    result = _publish(db_path, tmp_path / "proj")
    assert result.exit_code == 2, result.output
    assert f"error: nothing published: {path}: key 'contradiction[0].status'" in result.output
    assert publications() == before


def test_publish_refuses_an_empty_note_and_a_missing_database(tmp_path):
    result = _publish(tmp_path / "none.db", tmp_path / "proj", "--note", "  ")
    assert result.exit_code == 2 and "--note: empty" in result.output
    result = _publish(tmp_path / "none.db", tmp_path / "proj")
    assert result.exit_code == 1 and "none.db" in result.output
    assert not (tmp_path / "none.db").exists()


# -- every statement the article makes, not only its figures -----------------------------------
#
# One real run states one of each kind: two models (tiny-a pinned), a variant of each, a load sweep
# over streams and rates with a service level, a probe, a pass rule, an expectation, gates, a
# contradiction written by the author. Its figures are then set as a re-measurement would store them
# (the real timings on this shared machine decide nothing), published once, and each test corrects
# a copy of that store and builds it again.

STATEMENTS_CAMPAIGN = """
[gates.length_limit]
exclude = false
[gates.not_on_card]
exclude = false

[variants.sets]
kv8 = ["-ctk", "q8_0", "-ctv", "q8_0"]

[load]
streams = [1, 2, 4]
requests_per_stream = 1
rates = [2.0, 4.0, 8.0]
requests_per_rate = 2
max_tokens = 8

[load.slo]
per_user_decode_tps = 50

[probes]
run = ["coding"]
repeat = 1
max_tokens = 16

[rules]
fast = 'decode.short >= 45'

[expectations]
quick = 'decode.short >= 55'
"""
#: per model, the decode and prefill tok/s of its three short samples: tiny-b decodes measurably faster
#: than tiny-a, tiny-a fills the prompt measurably faster (a finding: the two rank them differently);
#: each variant within its model's scatter (no candidate is measurably fastest)
SHORT = {"tiny-a": ([50.0, 51.0, 52.0], [1000.0, 1010.0, 1020.0]),
         "tiny-b": ([60.0, 61.0, 62.0], [900.0, 905.0, 910.0]),
         "tiny-a~kv8": ([50.5, 51.5, 52.5], [1000.0, 1010.0, 1020.0]),
         "tiny-b~kv8": ([60.5, 61.5, 62.5], [900.0, 905.0, 910.0])}
#: aggregate output tok/s per step: the streams sweep stops rising at 2 streams, the rates sweep at 4/s
OUTPUT = {"load": {1: 100.0, 2: 190.0, 4: 200.0}, "rate": {2.0: 100.0, 4.0: 150.0, 8.0: 160.0}}
AUTHORED = """[[contradiction]]
title = {{ en = "Card clock against the log", de = "Kartenuhr gegen das Protokoll" }}
status = "{status}"
{resolution}
[contradiction.a]
text = {{ en = "The card reports a boost clock.", de = "Die Karte meldet einen Boost-Takt." }}
evidence = ["sample-{sample}"]
[contradiction.b]
text = {{ en = "The log reports the base clock.", de = "Das Protokoll meldet den Basistakt." }}
evidence = ["sample-{sample}"]
"""
RESOLVED = 'resolution = { en = "The log line predates the boost.", de = "Die Logzeile ist älter als der Boost." }'


def _short_samples(db, run_id, model) -> list[int]:
    return [r[0] for r in db.execute(
        "select samples.id from samples join cells on cells.id = samples.cell_id join models on models.id = "
        "cells.model_id where samples.run_id = ? and models.name = ? and cells.prompt_class = 'short' and "
        "coalesce(samples.kind, 'measure') = 'measure' order by samples.id", [run_id, model])]


def _steps(db, run_id, axis, model) -> dict[float, dict]:
    rows = db.execute("select st.id, st.streams, st.rate_rps, st.cell_id from load_steps st join models m "
                      "on m.id = st.model_id where st.run_id = ? and st.axis = ? and m.name = ?",
                      [run_id, axis, model]).fetchall()
    return {(streams if axis == "load" else rate): {"id": sid, "cell": cell} for sid, streams, rate, cell in rows}


def _set_output(db, step: dict, tps: float) -> None:
    """The step's wall time such that its answered requests' tokens make ``tps`` aggregate tok/s."""
    (generated,) = db.execute("select sum(generated_tokens) from samples where cell_id = ? and error_kind is null",
                              [step["cell"]]).fetchone()
    db.execute("update load_steps set wall_s = ? where id = ?", [generated / tps, step["id"]])


def _settle(db, run_id) -> None:
    """The run's figures as a re-measurement stored them: the article's statements known in advance."""
    for model, (decode, prefill) in SHORT.items():
        ids = _short_samples(db, run_id, model)
        assert len(ids) == 3, (model, ids)
        for sid, d, p in zip(ids, decode, prefill):
            db.execute("update samples set decode_tps = ?, prefill_tps = ? where id = ?", [d, p, sid])
    for axis, targets in OUTPUT.items():
        for model in ("tiny-a", "tiny-b"):
            steps = _steps(db, run_id, axis, model)
            assert sorted(steps) == sorted(targets), steps
            for x, tps in targets.items():
                _set_output(db, steps[x], tps)
                db.execute("update samples set decode_tps = 100 where cell_id = ?", [steps[x]["cell"]])
    # the rule as the settled figures decide it (decode.short 51 and 61 against 45): the outcome the run
    # stored came from this shared machine's real timings, which may have been slower
    db.execute("update rule_results set outcome = 'pass' where run_id = ?", [run_id])


@pytest.fixture(scope="module")
def statements_published(llama_server, tmp_path_factory):
    """The run, settled and published once (``cardproof publish`` with the author's notes); mkdocs left out."""
    from cardproof.report import build as build_mod

    root = tmp_path_factory.mktemp("statements")
    db_path, project = root / "s.db", root / "proj"
    store = open_store(db_path)
    text = campaign_text(llama_server.url, models=("tiny-a", "tiny-b"), classes=("short",), reps=3,
                         pinned="tiny-a") + STATEMENTS_CAMPAIGN
    out = run_campaign(store, parse_campaign(text, "s.toml"), echo=lambda s: None)
    assert out.status == "completed"
    # only a variant whose log proved its arguments may be named fastest
    assert [r[0] for r in store.db.execute("select status from variants")] == ["took", "took"]
    with store.db.conn:
        _settle(store.db, out.run_id)
    sample = _short_samples(store.db, out.run_id, "tiny-a")[0]  # the author's contradiction cites it
    store.close()
    (project / "notes").mkdir(parents=True)
    (project / "notes" / f"run-{out.run_id}.contradictions.toml").write_text(
        AUTHORED.format(status="open", resolution="", sample=sample))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(build_mod, "mkdocs_build", lambda project: project / "build" / "site")
        result = _publish(db_path, project)
    assert result.exit_code == 0, result.output
    return root, out.run_id


@pytest.fixture
def corrected(statements_published, tmp_path):
    """A copy of the published store and project, to correct: (db path, project, run id)."""
    root, run_id = statements_published
    shutil.copy(root / "s.db", tmp_path / "s.db")
    shutil.copytree(root / "proj", tmp_path / "proj")
    return tmp_path / "s.db", tmp_path / "proj", run_id


def _addendum(project, run_id, lang, label) -> str:
    """The line of the article's Addenda about ``label`` (as the line shows it: escaped, in bold)."""
    text = _article(project, run_id, lang)
    assert "{#addenda}" in text, f"no Addenda in the {lang} article"
    lines = [ln for ln in text.split("{#addenda}", 1)[1].splitlines() if f"**{esc(label)}**" in ln]
    assert len(lines) == 1, (label, text.split("{#addenda}", 1)[1])
    return lines[0]


def _quotes(line: str, was: str, now: str) -> None:
    """The line quotes the published words and the words that replaced them, in that order."""
    was, now = str(esc(was)), str(esc(now))
    assert was in line and now in line and line.index(was) < line.index(now), (was, now, line)


def _correct(db_path, project, run_id, correction) -> None:
    """Apply ``correction(db, run_id, project)`` to the store in one transaction, as a re-judging would."""
    store = open_store(db_path)
    try:
        with store.db.conn:
            correction(store.db, run_id, project)
    finally:
        store.close()


def _shift(model, index, by):
    """One short sample of ``model`` (``index``: its place in id order; None: all three) moved by ``by`` tok/s."""
    def correction(db, run_id, _project):
        ids = _short_samples(db, run_id, model)
        for sid in ids if index is None else [ids[index]]:
            db.execute("update samples set decode_tps = decode_tps + ? where id = ?", [by, sid])
    return correction


def _step_requests(assign: str):
    """The requests of tiny-a's 4-stream step as the server's counters state them again: ``assign``."""
    def correction(db, run_id, _project):
        cell = _steps(db, run_id, "load", "tiny-a")[4]["cell"]
        db.execute(f"update samples set {assign} where cell_id = ?", [cell])
    return correction


def _step_wall(factor: float):
    """tiny-a's 4-stream step took ``factor`` times its wall time: its aggregate output changes by 1 / factor."""
    def correction(db, run_id, _project):
        step = _steps(db, run_id, "load", "tiny-a")[4]
        db.execute("update load_steps set wall_s = wall_s * ? where id = ?", [factor, step["id"]])
    return correction


def _step_decode(values):
    """The decode tok/s of the requests of tiny-a's 4-stream step (a value each, in id order)."""
    def correction(db, run_id, _project):
        cell = _steps(db, run_id, "load", "tiny-a")[4]["cell"]
        ids = [r[0] for r in db.execute("select id from samples where cell_id = ? order by id", [cell])]
        for sid, v in zip(ids, values):
            db.execute("update samples set decode_tps = ? where id = ?", [v, sid])
    return correction


def _sql(sql, *models):
    """A statement on the rows of ``models`` (``{models}``: their ids) and the run (``?``)."""
    def correction(db, run_id, _project):
        ids = ", ".join(str(db.execute("select id from models where name = ?", [m]).fetchone()[0]) for m in models)
        db.execute(sql.format(models=ids), [run_id])
    return correction


def _resolved(db, run_id, project):
    sample = _short_samples(db, run_id, "tiny-a")[0]
    (project / "notes" / f"run-{run_id}.contradictions.toml").write_text(
        AUTHORED.format(status="resolved", resolution=RESOLVED, sample=sample))


def _moved(db, run_id, project):
    """The author's contradiction, still open, now cites tiny-a's second sample."""
    sample = _short_samples(db, run_id, "tiny-a")[1]
    (project / "notes" / f"run-{run_id}.contradictions.toml").write_text(
        AUTHORED.format(status="open", resolution="", sample=sample))


def _counters(column: str, value: str):
    """tiny-b's first short sample as the server's log or our clock states it again: ``column = value``."""
    def correction(db, run_id, _project):
        sid = _short_samples(db, run_id, "tiny-b")[0]
        db.execute(f"update samples set {column} = {value} where id = ?", [sid])
    return correction


def _gate(fired):
    """load_time re-judged on tiny-b's first short sample: fired, or the same verdict on a new observation."""
    def correction(db, run_id, _project):
        sid = _short_samples(db, run_id, "tiny-b")[0]
        db.execute("update gate_results set fired = ?, observed_text = 'rejudged' where sample_id = ? and "
                   "gate = 'load_time'", [1 if fired else 0, sid])
    return correction


def _probe_rows(assign: str):
    """tiny-b's coding tasks graded again: ``assign`` on their rows."""
    return _sql(f"update probe_results set {assign} where run_id = ? and model_id in ({{models}}) and probe = 'coding'",
                "tiny-b")



_NEVER_FIRED = ("Gates that never fired in this run — not_run — unproven: this gate was never seen to fire, so its "
                "silence proves nothing",
                "Gates, die in diesem Lauf nie ausgelöst haben — nicht gelaufen — unbewiesen: dieses Gate wurde nie "
                "auslösend gesehen, sein Schweigen beweist also nichts")

#: the words before of an outcome the run itself decided: as the publication recorded them
RECORDED = "as recorded"
#: per statement kind: the correction that changes the statement, the one that changes none, the
#: statement's label and its words before and after (en, de); None before: it was not stated
KIND_CASES = {
    "fastest": (_shift("tiny-a~kv8", None, 30.0), _shift("tiny-a~kv8", 0, 0.2),
                ("Variants: tiny-a · short · reasoning off", "Varianten: tiny-a · kurz · Reasoning aus"),
                ("No candidate decodes measurably faster than every other.",
                 "Kein Anwärter hat ein messbar schnelleres Decode als jeder andere."),
                ("Fastest decode: kv8, measurably ahead of every other candidate.",
                 "Schnellstes Decode: kv8, messbar vor jedem anderen Anwärter.")),
    "expectation": (_shift("tiny-a", None, 6.0), _shift("tiny-a", 0, -0.5),
                    ("What the author expected: quick, tiny-a", "Was der Autor erwartete: quick, tiny-a"),
                    ("refuted", "widerlegt"), ("confirmed", "bestätigt")),
    "verdict": (_sql("update rule_results set outcome = 'fail' where run_id = ? and model_id in ({models})", "tiny-b"),
                _sql("update rule_results set evaluated_at = '2030-01-01T00:00:00+00:00' where run_id = ? "
                     "and model_id in ({models})", "tiny-b"),
                ("Rule fast, tiny-b", "Regel fast, tiny-b"), RECORDED, ("fail", "nicht bestanden")),
    "probe": (_probe_rows("verdict = 'PASS', graded = 1"), _probe_rows("duration_ms = duration_ms + 1"),
              ("Probe verdicts: tiny-b, coding", "Urteile der Prüfungen: tiny-b, coding"), RECORDED,
              ("PASS 4/4", "PASS 4/4")),
    # the same tokens in half the step's time: 400 tok/s, still rising (twice the tokens per request would
    # make the steps' answers unequal, which states no knee); a later first token changes no output
    "knee": (_step_wall(0.5), _step_requests("ttft_ms = ttft_ms + 1"),
             ("Load: concurrent streams, tiny-a: knee", "Last: gleichzeitige Streams, tiny-a: Knick"),
             ("Aggregate throughput stops rising at 2 streams: no later step adds 10 % or more.",
              "Der Gesamtdurchsatz steigt ab 2 Streams nicht mehr: keine spätere Stufe bringt 10 % oder mehr."),
             ("Aggregate throughput still rises at the last step: the knee lies beyond it.",
              "Der Gesamtdurchsatz steigt auch in der letzten Stufe noch: der Knick liegt dahinter.")),
    "slo": (_step_decode([30.0] * 4), _step_decode([99.0]),
            ("Load: concurrent streams, tiny-a: service level", "Last: gleichzeitige Streams, tiny-a: Service-Level"),
            ("Meets the service level up to 4 concurrent streams.",
             "Erfüllt das Service-Level bis zu 4 gleichzeitigen Streams."),
            ("Meets the service level up to 2 concurrent streams.",
             "Erfüllt das Service-Level bis zu 2 gleichzeitigen Streams.")),
    "contradiction": (_resolved, _moved,
                      ("Contradiction: Card clock against the log", "Widerspruch: Kartenuhr gegen das Protokoll"),
                      ("open: The card reports a boost clock. — The log reports the base clock.",
                       "offen: Die Karte meldet einen Boost-Takt. — Das Protokoll meldet den Basistakt."),
                      ("resolved: The log line predates the boost.", "aufgelöst: Die Logzeile ist älter als der Boost.")),
    "contradiction opened": (_counters("wall_ms", "1.0"), _counters("predicted_ms", "predicted_ms + 0.5"),
                             ("Contradiction: Server counters longer than the request itself",
                              "Widerspruch: Serverzähler länger als die Anfrage selbst"),
                             None, ("open: The server's timings add up to", "offen: Die Zeiten des Servers ergeben")),
    "gate": (_gate(True), _gate(False), ("Gate load_time", "Gate load_time"), _NEVER_FIRED,
             ("Where gates fired: 1/12", "Wo Gates ausgelöst haben: 1/12")),
}


def _recorded(db_path, run_id, key) -> dict:
    """The statement the publication recorded under ``key``: its words as stored, per language."""
    store = open_store(db_path, mode="ro")
    try:
        row = store.db.execute("select shown_json from published_figures where run_id = ? and key = ?",
                               [run_id, key]).fetchone()
    finally:
        store.close()
    assert row is not None, f"no {key} recorded"
    return json.loads(row[0])["shown"]


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_a_correction_that_changes_a_statement_gets_an_addendum_quoting_both_wordings(kind, corrected):
    db_path, project, run_id = corrected
    change, _harmless, labels, was, now = KIND_CASES[kind]
    if was == RECORDED:
        was = tuple(_recorded(db_path, run_id, {"verdict": "verdict:fast|tiny-b",
                                                "probe": "probe:tiny-b|coding"}[kind])[lang] for lang in ("en", "de"))
        assert was[0] != now[0]
    _correct(db_path, project, run_id, change)
    build(db_path, project, run_mkdocs=False)
    for lang, label, before, after in zip(("en", "de"), labels, was or (None, None), now):
        line = _addendum(project, run_id, lang, label)
        if before is None:
            assert " not stated when published " in line or " bei der Veröffentlichung " in line, line
            assert str(esc(after)) in line, line
        else:
            _quotes(line, before, after)
    assert "since this build, not yet published" in _addendum(project, run_id, "en", labels[0])
    assert "seit diesem Build, noch nicht veröffentlicht" in _addendum(project, run_id, "de", labels[1])


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_a_correction_that_changes_no_statement_gets_no_addendum(kind, corrected):
    db_path, project, run_id = corrected
    _, harmless, labels, was, _now = KIND_CASES[kind]
    store = open_store(db_path, mode="ro")
    try:
        (kinds,) = store.db.execute("select statement_kinds from publications").fetchone()
        shown = [json.loads(r[0]) for r in store.db.execute("select shown_json from published_figures")]
    finally:
        store.close()
    assert kind.split()[0] in json.loads(kinds)  # recorded, so its opening would show too
    if was is not None:  # the statement was published, in both languages
        assert any(f["label"] == dict(zip(("en", "de"), labels)) for f in shown), labels
    _correct(db_path, project, run_id, harmless)
    build(db_path, project, run_mkdocs=False)
    for lang in ("en", "de"):
        text = _article(project, run_id, lang)
        assert "{#addenda}" not in text, text.split("{#addenda}", 1)[1]


RANKING = ("Findings: Prefill and decode rank the models differently",
           "Befunde: Prefill und Decode ordnen die Modelle verschieden")


def test_a_finding_withdrawn_and_one_stated_anew_each_get_an_addendum(corrected, monkeypatch):
    """tiny-b's prefill measured again faster: the two models no longer rank differently (withdrawn);
    published so; then measured as before: the finding is stated again, which that publication did not."""
    from cardproof.report import build as build_mod

    monkeypatch.setattr(build_mod, "mkdocs_build", lambda project: project / "build" / "site")
    db_path, project, run_id = corrected
    published = _recorded(db_path, run_id, "finding:ranking:short")
    assert published["en"].startswith("Prefill and decode rank the models differently: In the prompt class short")

    def prefill(by):
        def correction(db, run_id, _project):
            for sid in _short_samples(db, run_id, "tiny-b"):
                db.execute("update samples set prefill_tps = prefill_tps + ? where id = ?", [by, sid])
        return correction

    _correct(db_path, project, run_id, prefill(200.0))
    build(db_path, project, run_mkdocs=False)
    for lang, label, gone in zip(("en", "de"), RANKING, ("withdrawn: no longer stated", "zurückgezogen: nicht mehr "
                                                                                       "angegeben")):
        _quotes(_addendum(project, run_id, lang, label), published[lang], gone)
    assert _publish(db_path, project, "--note", "tiny-b's prefill measured again").exit_code == 0
    _correct(db_path, project, run_id, prefill(-200.0))
    build(db_path, project, run_mkdocs=False)
    for lang, label in zip(("en", "de"), RANKING):
        text = _article(project, run_id, lang).split("{#addenda}", 1)[1]
        withdrawn, anew = [ln for ln in text.splitlines() if f"**{esc(label)}**" in ln]
        assert "tiny-b&#39;s prefill measured again" in withdrawn  # why: the note of the publication it changed in
        assert (" not stated when published " if lang == "en" else " bei der Veröffentlichung ") in anew, anew
        assert anew.endswith(f": {esc(published[lang])} — " + ("recomputed from the database" if lang == "en"
                                                                else "aus der Datenbank neu berechnet")), anew


def test_the_recorded_words_are_the_articles(statements_published):
    """What the publication recorded of the Variants and Load sections is what the page says (emphasis aside)."""
    root, run_id = statements_published
    store = open_store(root / "s.db", mode="ro")
    rows = store.db.execute("select key, shown_json from published_figures where run_id = ? and (key like 'fastest:%' "
                            "or key like 'knee:%' or key like 'slo:%')", [run_id]).fetchall()
    store.close()
    assert {k.split(":")[0] for k, _ in rows} == {"fastest", "knee", "slo"} and len(rows) == 4 + 4 + 4
    for lang in ("en", "de"):
        page = _article(root / "proj", run_id, lang).replace("**", "").replace("`", "")
        for key, shown in rows:
            assert json.loads(shown)["shown"][lang] in page, (key, lang)


def test_a_publication_recorded_before_statements_still_reads_and_changes_nothing(corrected):
    """A publication made before (figures only, no kinds named, a rule's stored outcome): no addendum from
    the change of record alone, and a figure corrected since still gets one."""
    db_path, project, run_id = corrected
    store = open_store(db_path)
    legacy = "('decode', 'prefill', 'load', 'headline', 'verdict', 'caveat', 'finding')"
    with store.db.conn:
        store.db.execute("update publications set statement_kinds = null")
        store.db.execute(f"delete from published_figures where substr(key, 1, instr(key, ':') - 1) not in {legacy}")
        for key, shown in store.db.execute("select key, shown_json from published_figures").fetchall():
            old = {k: v for k, v in json.loads(shown).items() if k not in ("form", "legacy")}
            store.db.execute("update published_figures set shown_json = ? where key = ?", [json.dumps(old), key])
        # the rule's outcome as the run stored it, where the article said "unverified"
        store.db.execute("update published_figures set value = 'pass' where key like 'verdict:%'")
        store.db.execute("update rule_results set rule_text = rule_text || ' ' where run_id = ?", [run_id])
    store.close()
    build(db_path, project, run_mkdocs=False)
    assert "{#addenda}" not in _article(project, run_id, "en")
    assert "unverified" in _article(project, run_id, "en").split("## Decision", 1)[1]
    _correct(db_path, project, run_id, _shift("tiny-a~kv8", None, 30.0))
    build(db_path, project, run_mkdocs=False)
    _quotes(_addendum(project, run_id, "en", "tiny-a~kv8 · short · reasoning off: decode median"),
            "51.5 tok/s (n=3)", "81.5 tok/s (n=3)")
    assert "Variants:" not in _article(project, run_id, "en").split("{#addenda}", 1)[1]  # not recorded then
