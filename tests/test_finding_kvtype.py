"""The KV-type finding: the memory a smaller KV cache saves, beside what it costs in speed.

The views are written by hand in the shape ``report.variants.variants_view`` gives (one model, a
``kv8`` variant with ``--cache-type-k q8_0 --cache-type-v q8_0``), with the demo's figures: SmolLM2
at 8,192 tokens holds a 180 MiB F16 KV cache, 96 MiB as q8_0. A real run with the variant is
the demo's (tests/test_demo_end_to_end.py reads its article).
"""

from __future__ import annotations

import copy

from cardproof.report.findings import kvtype
from cardproof.report.findings.show import render
from cardproof.report.i18n import Lang

ARGS = ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]


def _view(*, args=ARGS, states=True, kv_variant=95.6, decode=None, prefill=None, card=False) -> dict:
    decode = decode or {"short": {"state": "measurable", "ratio": 0.91, "low": 0.85, "high": 0.97},
                        "medium": {"state": "same"}}
    prefill = prefill or {"short": {"state": "same"}, "medium": {"state": "unstable"}}
    mem = {"card_mib": 300.0 if card else None, "kv_mib": 180.0, "kv_line": 11,
           "process": {"peak_rss_mib": 294.0, "anon_mib": 200.0}}
    vmem = {"card_mib": 215.0 if card else None, "kv_mib": kv_variant, "kv_line": 22,
            "process": {"peak_rss_mib": 212.0, "anon_mib": 118.0}}
    v = {"name": "kv8", "model": "smollm2-q4_1~kv8", "args": args, "states": states, "load_id": 6, "memory": vmem}
    classes = [{"cls": cls, "reasoning": False, "base_cell": {"id": i},
                "entries": [{"variant": v, "cell": {"id": 30 + i}, "decode": decode[cls], "prefill": prefill[cls]}]}
               for i, cls in enumerate(("short", "medium"))]
    # the server process's peak per cell: the model's own cells 0 and 1, the variant's 30 and 31
    peaks = {"loads": [{"process_cells": [{"cell_id": 0, "peak_rss_mib": 319.0}, {"cell_id": 1, "peak_rss_mib": 386.0}]},
                       {"process_cells": [{"cell_id": 30, "peak_rss_mib": 236.0}, {"cell_id": 31, "peak_rss_mib": None}]}]}
    return {"memory": peaks,
            "variants": [{"base": "smollm2-q4_1", "variants": [v], "classes": classes, "base_memory": mem,
                          "base_load": 1}]}


def _said(view, lang="en") -> list[dict]:
    return [render(f, Lang(lang)) for f in kvtype.check(view)]


def test_the_memory_saved_is_stated_beside_the_speed_it_costs():
    [f] = _said(_view())
    text = str(f["text"])
    assert "q8\\_0" in str(f["title"]) and "47\u00a0%" in str(f["title"])  # 1 - 95.6 / 180
    assert "[96 MiB](#line-22)" in text and "[180 MiB](#line-11)" in text
    # like for like: the same prompt class, not each load's own peak (which spans its steps and probes)
    assert "in the class short its server process peaked at [236 MiB](#cell-30) against [319 MiB](#cell-0)" in text
    assert "212" not in text and "294" not in text and "medium its server" not in text  # no reading in cell 31
    assert "short: decode [×0.91](#cell-30), prefill no measurable difference" in text
    assert "medium: decode no measurable difference, prefill unstable" in text


def test_cards_are_named_where_the_card_was_read():
    [f] = _said(_view(card=True))
    assert "on the cards [215 MiB](#fig-load-6) against 300 MiB" in str(f["text"])


def test_no_like_for_like_reading_is_said_as_such():
    view = _view()
    view["memory"] = {}
    [f] = _said(view)
    assert "no reading of the memory held compares the two in one prompt class" in str(f["text"])


def test_no_measurable_cost_is_said_as_such():
    same = {"short": {"state": "same"}, "medium": {"state": "same"}}
    [f] = _said(_view(decode=same, prefill=same))
    assert "What it costs in speed: no measurable difference in any class it measured." in str(f["text"])


def test_silent_where_the_data_does_not_carry_it():
    assert kvtype.check(_view(states=False)) == []  # its log contradicted an argument
    assert kvtype.check(_view(args=["--threads", "1"])) == []  # no KV cache type changed
    assert kvtype.check(_view(kv_variant=180.0)) == []  # the KV cache did not shrink
    no_kv = _view()
    no_kv["variants"][0]["base_memory"]["kv_mib"] = None  # the base's log states no KV cache
    assert kvtype.check(no_kv) == []


def test_one_type_for_k_only_is_named_with_both():
    [f] = _said(_view(args=["-ctk", "q4_0"]))
    assert "q4\\_0/f16" in str(f["title"])


def test_german_says_every_part_in_german():
    [f] = _said(_view(), "de")
    text = str(f["text"]) + str(f["title"]) + str(f["condition"]) + str(f["caveat"])
    for english in ("holds", "against", "decode no measurable", "What it costs", "server process", "unstable"):
        assert english not in text, english
    assert "kein messbarer Unterschied" in text and "×0,91" in text


def test_a_damaged_view_states_nothing_rather_than_crash():
    view = copy.deepcopy(_view())
    view["variants"][0]["variants"][0]["memory"] = {}
    assert kvtype.check(view) == []
