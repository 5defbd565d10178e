"""The article opens with its conclusion: a summary made from the view and the findings, in both languages.

Real parts: generated runs written into a real SQLite store as the runner writes them
(tests/findings_data.py), the frozen pass rule evaluated by the rule engine, and the article
rendered by the real templates with the real catalogue.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from cardproof.cli import cli

from cardproof.daemon.campaign.rules.outcome import evaluate_rules
from cardproof.daemon.store import open_store
from cardproof.report import summary
from cardproof.report.i18n import CATALOGUE

from findings_data import M, make_run

RULE = '[rules]\ncandidate = "decode.short >= 1.1 * incumbent.decode.short"\n'
PLACEHOLDER = re.compile(r"\{[a-z_]*\}")
LINKED = re.compile(r"\[([0-9][0-9.,\u202f\u00a0]*)\]\((run-\d+-evidence\.md#[a-z]+-\d+|#[a-z-]+\d+)\)")


def _ladder(tmp_path, *, q4_prefill=370.0):
    """A ladder like the demo's: the small file decodes fastest and reads prompts slowest; F16 is pinned."""
    models = [M("q4", {"quantisation": "Q4_1"}, decode=60.0, prefill=q4_prefill),
              M("q8", {"quantisation": "Q8_0", "requantized_from": "q4"}, decode=45.0, prefill=580.0),
              M("f16", {"quantisation": "F16", "requantized_from": "q4"}, decode=30.0, prefill=620.0, pinned=True)]
    path = tmp_path / "s.db"
    rid = make_run(path, models, extra=RULE)
    store = open_store(path)
    try:
        evaluate_rules(store, rid, echo=lambda _line: None)
    finally:
        store.close()
    return path, rid


def _article(path, rid):
    """The run's article in both languages, as ``cardproof report build`` writes it."""
    project = path.parent / "project"
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(path), "--project", str(project), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    runs = project / "site" / "runs"
    return None, {"en": (runs / f"run-{rid}.md").read_text(), "de": (runs / f"run-{rid}.de.md").read_text()}


def _summary_of(page: str) -> str:
    block = page.split('!!! abstract "', 1)[1]
    return block.split("\n\n", 1)[0]


def test_every_summary_message_has_german_with_its_placeholders():
    msgids = [v for k, v in vars(summary).items() if k.isupper() and isinstance(v, str) and "{" in v or k == "SECTION"]
    assert len(msgids) > 20
    for msgid in msgids:
        assert msgid in CATALOGUE, msgid
        assert sorted(PLACEHOLDER.findall(CATALOGUE[msgid])) == sorted(PLACEHOLDER.findall(msgid)), msgid


def test_the_article_opens_with_its_conclusion_in_both_languages(tmp_path):
    path, rid = _ladder(tmp_path)
    _ctx, pages = _article(path, rid)
    en, de = pages["en"], pages["de"]
    # the summary comes before the status block, right under the title
    assert en.index('!!! abstract "Summary"') < en.index("**Status:**")
    assert de.index('!!! abstract "Zusammenfassung"') < de.index("**Status:**")
    text = _summary_of(en)
    sentences = [s for s in re.split(r"(?<=[.)])\s+(?=[A-Z])", text.split("\n", 1)[1].strip()) if s]
    assert 5 <= len(sentences) <= 8, sentences
    assert "**q4** is the fastest in every prompt class" not in text  # names are data: escaped, not bolded
    assert "Decode: q4 is the fastest in every prompt class, measurably ahead of every other model" in text
    assert "So q4 answers the fastest but reads prompts the slowest, measurably in both" in text
    # the pass is stated, and kept apart from whether it is worth adopting
    assert "By the pass rule candidate (`decode.short >= 1.1 * incumbent.decode.short`), fixed when the run " \
           "started: q4: pass (decode.short = 60.0, incumbent.decode.short = 30.1); " in text
    assert "Passing the rule is not the same as being worth adopting: the rule weighs only decode.short" in text
    assert "q4 is measurably behind f16 in prefill of the class short" in text
    assert "Main caveat: q8, f16 were made from q4 with llama-quantize" in text
    german = _summary_of(de)
    assert "Decode: q4 ist in jeder Prompt-Klasse am schnellsten" in german
    assert "liegt q4 im Prefill der Klasse kurz messbar hinter f16" in german
    assert "Tok./s" in german and "tok/s" not in german


@pytest.mark.parametrize("lang", ["en", "de"])
def test_every_number_of_the_summary_is_shown_elsewhere_linked_the_same_way(tmp_path, lang):
    path, rid = _ladder(tmp_path)
    _ctx, pages = _article(path, rid)
    page = pages[lang]
    text = _summary_of(page)
    rest = page.replace(text, "")
    linked = LINKED.findall(text)
    assert len(linked) >= 18  # decode and prefill of 3 models in 2 classes, the time to first token, the gaps
    for number, link in linked:
        assert f"[{number}]({link})" in rest, (number, link)
    # unlinked numbers (rule values, counts) are printed elsewhere too
    bare = re.findall(r"(?<![\w.,\[#-])(\d+(?:[.,]\d+)*)(?![\w\]])", LINKED.sub("", text))
    for number in bare:
        assert number in rest, number


def test_no_swap_where_the_small_file_also_reads_prompts_fastest(tmp_path):
    path, rid = _ladder(tmp_path, q4_prefill=900.0)
    _ctx, pages = _article(path, rid)
    text = _summary_of(pages["en"])
    assert "reads prompts the slowest" not in text
    assert "Prefill: q4 reads prompts the fastest in every prompt class" in text
    assert "q8 is measurably behind f16 in prefill" in text and "q4 is measurably behind" not in text


def test_an_unfinished_run_states_no_conclusion(tmp_path):
    path = tmp_path / "u.db"
    rid = make_run(path, [M("a", decode=50.0), M("b", decode=40.0)], status="interrupted")
    _ctx, pages = _article(path, rid)
    text = _summary_of(pages["en"])
    assert "This run did not finish (20 of 20 samples measured), so it states no conclusion" in text
    assert "Decode" not in text


def test_a_busy_machine_is_the_main_caveat_with_the_setups_figures(tmp_path):
    """A run on a machine with more work than CPUs: that limits every rate, so it is the caveat named first."""
    from cardproof.daemon.store import dumps

    path, rid = _ladder(tmp_path)
    store = open_store(path)
    try:
        store.insert("run_setup", {"run_id": rid, "cpu_model": "AMD EPYC", "cpu_threads": 2, "usable_cpus": 2,
                                   "load_start_json": dumps({"one": 7.4, "five": 5.31, "fifteen": 6.56}),
                                   "load_end_json": dumps({"one": 16.34, "five": 14.17, "fifteen": 10.71})})
    finally:
        store.close()
    _ctx, pages = _article(path, rid)
    text = _summary_of(pages["en"])
    assert "Main caveat: the machine had more work than CPUs during the run (load average over one minute 7.40 at " \
           "its start and 16.34 at its end, on 2 CPUs)" in text
    assert "on the CPU alone (AMD EPYC, 2 CPUs usable by the run, no GPU seen)" in text
    setup = pages["en"][pages["en"].index("## Setup {#setup}"):]
    assert "**CPU:** AMD EPYC · physical cores — · logical CPUs 2 · usable by the run 2" in setup
    assert "at the start 7.40, 5.31, 6.56; at the end 16.34, 14.17, 10.71; against 2 CPUs" in setup
    assert "Wichtigste Einschränkung: Die Maschine hatte während des Laufs mehr Arbeit als CPUs" in pages["de"]


def test_a_rule_that_reads_unstable_cells_decides_nothing(tmp_path):
    models = [M("q4", {"quantisation": "Q4_1"}, values=[30.0, 60.0, 90.0, 45.0, 50.0], prefill=370.0),
              M("f16", {"quantisation": "F16", "requantized_from": "q4"}, decode=30.0, prefill=620.0, pinned=True)]
    path = tmp_path / "u.db"
    rid = make_run(path, models, extra=RULE)
    store = open_store(path)
    try:
        evaluate_rules(store, rid, echo=lambda _line: None)
    finally:
        store.close()
    _ctx, pages = _article(path, rid)
    text = _summary_of(pages["en"])
    assert "q4: unstable (decode.short = " in text
    assert " (unstable)" in text  # its decode figure is shown, marked as the main table marks it
    assert "this run decides nothing about replacing f16" in text
    assert "nothing in this run argues for replacing" not in text
