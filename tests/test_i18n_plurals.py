"""Where a count meets a noun, the form comes from the catalogue's plural forms in both languages:
"stops rising at 1 stream", "ab 1 Stream", never "1 streams" / "1 Streams"."""

import re

import pytest

from cardproof.report.article_parts import summary_paragraph
from cardproof.report.axes import beyond_words, knee_sentence, level_sentence
from cardproof.report.findings.base import Fig, Line
from cardproof.report.history.chart import cell_label
from cardproof.report.i18n import Lang
from cardproof.report.render import environment
from cardproof.report.summary import NOT_FINISHED

EN, DE = Lang("en"), Lang("de")

# (language, count) -> the words that must appear, and those that must not
STREAMS = {
    ("en", 1): ("1 stream", "1 streams"), ("en", 2): ("2 streams", None),
    ("de", 1): ("1 Stream", "1 Streams"), ("de", 2): ("2 Streams", None),
}


def _words(phrase: str) -> re.Pattern:
    """``phrase`` as written, or with one adjective after the count ("1 gleichzeitigen Stream")."""
    count, rest = phrase.split(" ", 1)
    return re.compile(rf"(?<![\d.,]){re.escape(count)} (?:\w+ )?{re.escape(rest)}(?!\w)")


def _check(text: str, lang: str, n: int, table=STREAMS):
    want, refused = table[(lang, n)]
    assert _words(want).search(text), text
    if refused:
        assert not _words(refused).search(text), text


@pytest.mark.parametrize("lang,n", sorted(STREAMS))
def test_knee_sentence_agrees_with_its_stream_count(lang, n):
    text = knee_sentence(Lang(lang), "load", {"knee": n})
    _check(text, lang, n)


@pytest.mark.parametrize("lang,n", sorted(STREAMS))
def test_service_level_sentences_agree_with_their_stream_count(lang, n):
    L = Lang(lang)
    _check(level_sentence(L, "load", {"streams": n}), lang, n)
    _check(beyond_words(L, "load", {"streams": n}), lang, n)


@pytest.mark.parametrize("lang,n", sorted(STREAMS))
def test_trend_cell_label_agrees_with_its_stream_count(lang, n):
    _check(cell_label({"kind": "load", "streams": n, "prompt_class": "short"}, Lang(lang)), lang, n)


RATES = {("en", 1): ("1 request per second", "1 requests"), ("en", 2): ("2 requests per second", None),
         ("de", 1): ("1 Anfrage pro Sekunde", "1 Anfragen"), ("de", 2): ("2 Anfragen pro Sekunde", None)}


@pytest.mark.parametrize("lang,n", sorted(RATES))
def test_rate_sentences_agree_with_the_rate_as_shown(lang, n):
    L = Lang(lang)
    e = {"x": float(n), "x_digits": 0}
    _check(level_sentence(L, "rate", e), lang, n, RATES)
    _check(beyond_words(L, "rate", e), lang, n, RATES)
    _check(knee_sentence(L, "rate", {"knee": float(n), "knee_digits": 0}), lang, n, RATES)


def test_a_rate_shown_with_decimals_takes_the_plural():
    assert "1.0 requests per second" in level_sentence(EN, "rate", {"x": 1.0, "x_digits": 1})
    assert "1,0 Anfragen pro Sekunde" in level_sentence(DE, "rate", {"x": 1.0, "x_digits": 1})


SAMPLES = {("en", 1): ("of 1 sample measured", "1 samples"), ("en", 2): ("of 2 samples measured", None),
           ("de", 1): ("von 1 Messung erhoben", "1 Messungen"), ("de", 2): ("von 2 Messungen erhoben", None)}


@pytest.mark.parametrize("lang,n", sorted(SAMPLES))
def test_summary_line_with_a_count_takes_its_form(lang, n):
    line = Line(NOT_FINISHED, {"measured": Fig(0, "int"), "planned": Fig(n, "int")}, count="planned")
    _check(summary_paragraph([line], Lang(lang)), lang, n, SAMPLES)


LOADS = {("en", 1): ("1 load", "1 loads"), ("en", 2): ("2 loads", None),
         ("de", 1): ("1 Ladevorgang", "1 Ladevorgänge"), ("de", 2): ("2 Ladevorgänge", None)}


@pytest.mark.parametrize("lang,n", sorted(LOADS))
def test_template_ngettext_takes_the_catalogue_form(lang, n):
    text = environment().from_string("{{ ngettext('%(num)s load', '%(num)s loads', n) }}").render(L=Lang(lang), n=n)
    _check(text, lang, n, LOADS)


def test_template_counts_meet_nouns_through_ngettext():
    """No template prints a bare count before a translated plural noun (``{{ n }} {{ _('lines') }}``)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "report" / "templates"
    bare = re.compile(r"\}\}\s*\{\{ ?_\('(lines|loads|requests|samples measured|exceptions|streams|runs|readings|"
                      r"(?:directly )?comparable cells|known probe defects[^']*)'\)")
    found = [f"{p.name}: {m.group(0)}" for p in root.rglob("*.j2") for m in bare.finditer(p.read_text())]
    assert not found, found


REQUESTS = {("en", 1): ("1 measured request", "1 measured requests"), ("en", 2): ("2 measured requests", None),
            ("de", 1): ("1 gemessene Anfrage", "1 gemessene Anfragen"), ("de", 2): ("2 gemessene Anfragen", None)}


@pytest.mark.parametrize("lang,n", sorted(REQUESTS))
def test_draft_caveat_counts_its_measured_requests(lang, n):
    from cardproof.report.article_parts import render_caveat
    from cardproof.report.reconcile import reconciliations

    # n measured samples with draft tokens; the server log counted other requests too
    view = {"models": [{"name": "m", "cells": {("short", False): {"samples": [{"draft_tokens": 10,
                                                                               "draft_accepted": 5}] * n}}}],
            "evidence": {"loads": [{"id": 1, "model": "m", "facts": {
                "draft_acceptance": {"accepted": 99, "generated": 200, "requests": 9}}}]}}
    shown = [render_caveat(c, Lang(lang))["text"] for c in reconciliations(view) if c.title.startswith("Draft")]
    assert len(shown) == 1
    _check(shown[0], lang, n, REQUESTS)


SLOTS = {("en", 1): ("1 slot", "1 slots"), ("en", 2): ("2 slots", None),
         ("de", 1): ("1 Slot", "1 Slots"), ("de", 2): ("2 Slots", None)}
CPUS = {("en", 1): ("1 CPU", "1 CPUs"), ("en", 2): ("2 CPUs", None),
        ("de", 1): ("1 CPU", "1 CPUs"), ("de", 2): ("2 CPUs", None)}


@pytest.mark.parametrize("lang,n", sorted(SLOTS))
def test_the_context_caveat_counts_the_loads_slots(lang, n):
    """The demo's one-slot server read "1 slots" in the context finding's caveat."""
    from cardproof.report.findings.context import _caveat

    view = {"depth_steps": [{"model": "m", "settings": {"flash_attn": "on", "kv_cache_type_k": "f16",
                                                         "kv_cache_type_v": "f16", "slots": n}}]}
    _check(summary_paragraph([_caveat(view, "m")], Lang(lang)), lang, n, SLOTS)


@pytest.mark.parametrize("lang,n", sorted(CPUS))
def test_the_busy_machine_caveat_and_the_setup_count_the_cpus(lang, n):
    from cardproof.report.summary import CAVEAT_BUSY

    line = Line(CAVEAT_BUSY, {"start": Fig(3.5, digits=2), "end": Fig(2.5, digits=2), "cpus": Fig(n, "int")},
                count="cpus")
    _check(summary_paragraph([line], Lang(lang)), lang, n, CPUS)
    text = environment().from_string("{{ ngettext('against %(num)s CPU', 'against %(num)s CPUs', n) }}").render(
        L=Lang(lang), n=n)
    _check(text, lang, n, CPUS)
