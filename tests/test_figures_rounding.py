"""One rounding per figure: a measured value reads the same everywhere on a page.

Real parts: a generated run written into a real SQLite store as the runner writes it
(tests/findings_data.py), its frozen rule and expectation evaluated by the rule engine, and the
article rendered by the real templates. The medians are recomputed here from the stored samples,
not taken from the report.
"""

from __future__ import annotations

import re
import sqlite3
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.rules.outcome import evaluate_rules
from cardproof.daemon.store import open_store
from cardproof.report.figures import DIGITS, rule_digits, rule_kind
from cardproof.report.i18n import Lang

from findings_data import M, make_run

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "report" / "templates"
# Templates that print raw rows on purpose (more digits than the figure they support).
RAW = {"run_evidence.md.j2", "evidence_steps.md.j2"}
# llama-bench's own tokens per second: a separate tool's figure, printed once, never beside ours.
OWN_ROUNDING = {"llama_bench.md.j2"}
QUANTITY = re.compile(r"L\.num\(([^()]*(?:\([^()]*\))?[^()]*)\)")
NAMES = re.compile(r"decode|prefill|ttft|e2e|itl_|queue_ms|output_tps|requests_per_s|sent_rps|load_seconds")

CAMPAIGN = ('[rules]\nfast_reader = "prefill.long >= 900"\n'
            '[expectations]\nreads_fast = "prefill.long >= 300"\ndecodes = "decode.short >= 1.05 * incumbent.decode.short"\n')


def test_templates_print_measured_quantities_through_their_one_rounding():
    """A decode, prefill, TTFT, latency or rate figure goes through L.fig (report/figures.py), never L.num."""
    offenders = []
    for path in sorted(TEMPLATES.rglob("*.j2")):
        if path.name in RAW | OWN_ROUNDING:
            continue
        for arg in QUANTITY.findall(path.read_text()):
            if NAMES.search(arg) and not re.search(r"\.n\b|duration_ms", arg):
                offenders.append(f"{path.relative_to(ROOT)}: L.num({arg})")
    assert offenders == []


@pytest.mark.parametrize(("name", "value", "text", "shown"), [
    ("prefill.long", 68.164, "prefill.long >= 500", "68"),
    ("decode.short", 3.134, "decode.short >= 3", "3.1"),
    ("incumbent.decode.short", 3.134, "decode.short >= incumbent.decode.short", "3.1"),
    ("variant.kv8.prefill.long", 257.24, "variant.kv8.prefill.long > 100", "257"),
    ("ttft_ms.medium", 2456.4, "ttft_ms.medium < 3000", "2,456"),
    ("probe.coding.passed", 1.0, "probe.coding.passed == incumbent.probe.coding.passed", "1"),
    # rounded to the threshold it fails: as many more places as tell them apart
    ("prefill.long", 499.6, "prefill.long >= 500", "499.6"),
    ("decode.short", 9.96, "decode.short >= 10", "9.96"),
])
def test_a_rule_value_is_rounded_as_its_quantity(name, value, text, shown):
    assert Lang("en").rule_value(name, value, text) == shown


def test_every_rule_quantity_has_a_rounding():
    for name in ("decode.short", "prefill.long", "ttft_ms.short", "load_seconds", "card_mib", "probe.x.total"):
        assert rule_kind(name) in DIGITS, name
    assert rule_digits("quality.kld_mean", 0.0123) == 2  # no fixed rounding: two places, as before


def _renderings(L: Lang, value: float) -> set[str]:
    return {L.num(value, d) for d in range(4)}


@pytest.mark.parametrize("lang", ["en", "de"])
def test_no_stored_median_is_printed_two_ways_on_the_article(tmp_path, lang):
    models = [M("q4", {"quantisation": "Q4_1"}, decode=61.37, prefill=371.46),
              M("f16", {"quantisation": "F16", "requantized_from": "q4"}, decode=33.81, prefill=617.29, pinned=True)]
    path = tmp_path / "r.db"
    rid = make_run(path, models, extra=CAMPAIGN)
    store = open_store(path)
    try:
        evaluate_rules(store, rid, echo=lambda _line: None)
    finally:
        store.close()
    project = tmp_path / "project"
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(path), "--project", str(project), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    page = (project / "site" / "runs" / (f"run-{rid}.md" if lang == "en" else f"run-{rid}.de.md")).read_text()
    assert "prefill.long = " in page  # the rule and the expectations print what they read
    text = re.sub(r"\]\([^)]*\)|`[^`]*`|\{#[^}]*\}|<[^>]+>", " ", page)  # links, code, anchors: not figures
    text = re.sub(r"\d{4}-\d\d-\d\d( \d\d:\d\d(:\d\d)?)?", " ", text)  # times: not figures either
    tokens = set(re.findall(r"(?<![\d.,])\d[\d.,\u202f\u00a0]*\d|(?<![\d.,])\d(?![\d])", text))
    conn = sqlite3.connect(path)
    medians = {}
    for cell, metric in conn.execute("select id, 'x' from cells where run_id = ?", [rid]).fetchall():
        for col in ("decode_tps", "prefill_tps"):
            vals = [r[0] for r in conn.execute(
                f"select {col} from samples where cell_id = ? and {col} is not null and error_kind is null", [cell])]
            if len(vals) >= 1:
                medians[(cell, col)] = statistics.median(vals)
    assert len(medians) >= 4
    L = Lang(lang)
    twice = {k: sorted(_renderings(L, v) & tokens) for k, v in medians.items()}
    assert {k: shown for k, shown in twice.items() if len(shown) > 1} == {}
    assert sum(1 for shown in twice.values() if shown) >= 4  # the figures are on the page at all
