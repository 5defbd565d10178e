"""The peer bench's GuideLLM half (bench/peer_guidellm.py): what it asks GuideLLM and how it reads the answer.

GuideLLM itself is not installed in cardproof's environment (it lives in a
venv of its own, bench/peer_agreement.py): the report read here is a
recorded one, trimmed from a real GuideLLM 0.8.1 run against the tiny
model on llama-server (tests/fixtures/guidellm_0.8.1_report.json).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import peer_guidellm  # noqa: E402

REPORT = Path(__file__).parent / "fixtures" / "guidellm_0.8.1_report.json"


def test_figures_are_read_under_cardproofs_definitions():
    f = peer_guidellm.figures(REPORT)
    bench = json.loads(REPORT.read_text())["benchmarks"][0]
    # aggregate: all output tokens of the step over its duration (GuideLLM's own mean rate says the same)
    assert f["output_tps"] == pytest.approx(256.0 / bench["duration"])
    assert f["output_tps_own"] == pytest.approx(bench["metrics"]["output_tokens_per_second"]["successful"]["mean"])
    assert f["output_tps"] == pytest.approx(f["output_tps_own"], rel=1e-6)
    assert f["tpot_ms"] == pytest.approx(bench["metrics"]["inter_token_latency_ms"]["successful"]["median"])
    assert f["ttft_ms"] == pytest.approx(bench["metrics"]["time_to_first_token_ms"]["successful"]["median"])
    assert (f["requests"], f["prompt_tokens"], f["output_tokens"]) == (8, 157.0, 32.0)
    assert f["e2e_ms"] == pytest.approx(bench["metrics"]["request_latency"]["successful"]["mean"] * 1000.0)  # s -> ms
    assert f["in_flight"] == pytest.approx(bench["metrics"]["request_concurrency"]["successful"]["mean"])
    assert f["window_s"] == bench["duration"]


def test_a_missing_metric_is_none_not_a_crash(tmp_path):
    data = json.loads(REPORT.read_text())
    del data["benchmarks"][0]["metrics"]["inter_token_latency_ms"]
    data["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["median"] = "n/a"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    f = peer_guidellm.figures(path)
    assert f["tpot_ms"] is None and f["ttft_ms"] is None and f["output_tps"] is not None


@pytest.mark.parametrize("profile, streams", [("synchronous", 1), ("concurrent", 1), ("concurrent", 4)])
def test_scenario_pins_what_cardproof_sends(tmp_path, profile, streams):
    spec = peer_guidellm.scenario("http://127.0.0.1:9", "tiny-a", streams, 4 * streams, 128, 32, "/tok",
                                  tmp_path / "out.json", profile=profile)["spec"]
    assert spec["profile"] == ({"kind": "synchronous"} if profile == "synchronous"
                               else {"kind": "concurrent", "streams": [streams]})
    assert spec["data"] == [{"kind": "synthetic_text", "prompt_tokens": 128, "output_tokens": 32}]
    assert spec["constraints"] == [{"kind": "max_requests", "count": 4 * streams}]
    body = spec["backend"]["extras"]["body"]
    # every answer output_tokens long, as cardproof's step asks under bench/fixed_length.py
    assert body == {"cache_prompt": False, "chat_template_kwargs": {"enable_thinking": False}, "ignore_eos": True}
    assert spec["tokenizer"] == {"kind": "hf_auto", "model": "/tok"}  # a local folder: nothing from the Hub
    assert spec["outputs"] == [{"kind": "json", "path": str(tmp_path / "out.json")}]


def test_guidellm_reads_cardproofs_own_prompts_from_a_file(tmp_path):
    """Both tools time the same work: GuideLLM's data is a JSON-lines file of cardproof's prompts
    (daemon/server/prompts.py, a fresh nonce each) with the answer length as each row's output count, the
    column names GuideLLM's column mapper reads (``prompt``, ``output_tokens_count``)."""
    from cardproof.daemon.server.prompts import build_prompt

    path = peer_guidellm.prompts_file(tmp_path / "p.jsonl", 6, 128, 512)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 6 and all(set(r) == {"prompt", "output_tokens_count"} for r in rows)
    assert all(r["output_tokens_count"] == 512 for r in rows)
    nonces = [r["prompt"].split()[1].rstrip(".") for r in rows]
    assert len(set(nonces)) == 6  # no prompt repeats, so no prefix cache answers one from another
    assert all(r["prompt"] == build_prompt(128, n) for r, n in zip(rows, nonces))
    spec = peer_guidellm.scenario("http://127.0.0.1:9", "tiny-b", 2, 6, 128, 512, "/tok", tmp_path / "o.json",
                                  prompts=path)["spec"]
    assert spec["data"] == [{"kind": "json_file", "path": str(path)}]


def test_paired_ratios_hold_still_where_the_machine_drifts():
    """Each repeat's two runs are made one after the other: a machine whose pace drifts between repeats
    moves both alike. The pairs' ratio is then 1, where a ratio of the two medians is not."""
    from peer_agreement import paired

    drift = [1.0, 1.3, 0.8]  # the server's pace per repeat
    ours = [{"tpot_ms": 2.0 * d} for d in drift]
    theirs = [{"tpot_ms": 2.0 * d} for d in (drift[0], drift[1], 1.3)]  # the third run caught the slow phase
    assert paired(ours, theirs, "tpot_ms") == pytest.approx((1.0, 0.8 / 1.3, 1.0))
    assert statistics.median(o["tpot_ms"] for o in ours) / statistics.median(t["tpot_ms"] for t in theirs) \
        == pytest.approx(2.0 / 2.6)
    ours = [{"tpot_ms": 2.1 * d} for d in drift]  # a client that times 5 % more in every pair
    assert paired(ours, [{"tpot_ms": 2.0 * d} for d in drift], "tpot_ms") == pytest.approx((1.05, 1.05, 1.05))
    assert paired([{"tpot_ms": None}], [{"tpot_ms": 1.0}], "tpot_ms") is None
    assert paired([{"itl_ms": 3.0}], [{"tpot_ms": 2.0}], "itl_ms", "tpot_ms") == pytest.approx((1.5, 1.5, 1.5))


def test_server_decode_time_per_token_is_read_from_the_log_of_one_tools_run(llama_server):
    """``server_tpot_ms`` against the real server: the log from a mark holds only the requests sent since, and of
    those only the answers of max_tokens tokens count; it equals the server's own timings sent with each answer."""
    import httpx

    from peer_agreement import server_tpot_ms, step_timings

    def ask(max_tokens: int) -> dict:
        body = {"model": "tiny-a", "messages": [{"role": "user", "content": f"count {max_tokens}"}],
                "max_tokens": max_tokens, "ignore_eos": True, "cache_prompt": False}
        r = httpx.post(llama_server.url + "/v1/chat/completions", json=body, timeout=60)
        r.raise_for_status()
        return r.json()["timings"]

    import time as _time

    def written(start: int, n: int) -> list[dict]:
        """The timing lines of 16-token answers from ``start`` once ``n`` are there: the server writes
        its log after it answers, a moment later under load."""
        lines = step_timings(llama_server.log_path, start, 16)
        deadline = _time.monotonic() + 10
        while len(lines) < n and _time.monotonic() < deadline:
            _time.sleep(0.1)
            lines = step_timings(llama_server.log_path, start, 16)
        return lines

    before = llama_server.log_path.stat().st_size
    ask(16)  # before the mark: not this run's
    assert len(written(before, 1)) == 1
    mark = llama_server.log_path.stat().st_size
    timings = [ask(16), ask(16), ask(16), ask(3)]
    lines = written(mark, 3)
    assert len(lines) == 3, lines
    got = server_tpot_ms(lines)
    want = statistics.median(t["predicted_ms"] / t["predicted_n"] for t in timings[:3])
    assert all(t["predicted_n"] == 16 for t in timings[:3]) and timings[3]["predicted_n"] == 3
    assert got == pytest.approx(want, rel=0.01)  # the log prints ms to two decimals
    # the server's busy share: each request's own prompt + decode time over window x streams
    from peer_agreement import server_busy

    busy = server_busy(step_timings(llama_server.log_path, mark, 16, 3), 2.0, 2)
    assert busy == pytest.approx(sum(t["prompt_ms"] + t["predicted_ms"] for t in timings[:3]) / 1000.0 / 4.0,
                                 rel=0.01)
    assert server_busy(step_timings(llama_server.log_path, mark, 16, 3), None, 2) is None
    # the step's own requests are the last ones: the two after the first
    assert server_tpot_ms(step_timings(llama_server.log_path, mark, 16, last=2)) == pytest.approx(
        min(t["predicted_ms"] / t["predicted_n"] for t in timings[1:3]), rel=0.01)
    assert server_tpot_ms(step_timings(llama_server.log_path, llama_server.log_path.stat().st_size, 16)) is None


REQUESTS = Path(__file__).parent / "fixtures" / "guidellm_0.8.1_requests.json"


def test_medians_are_taken_as_guidellm_takes_them():
    """A real GuideLLM 0.8.1 report (16 requests, trimmed; provenance in the file): its reported ITL and
    TTFT medians are the lower middle of the requests' values weighted as GuideLLM weighs them (ITL by
    tokens - 1), which ``guidellm_median`` gives exactly and ``statistics.median`` does not."""
    from peer_agreement import guidellm_median

    bench = json.loads(REQUESTS.read_text())["benchmarks"][0]
    reqs = bench["requests"]["successful"]
    assert len(reqs) == 16
    itl = [r["inter_token_latency_ms"] for r in reqs]
    ttft = [r["time_to_first_token_ms"] for r in reqs]
    want_itl = bench["metrics"]["inter_token_latency_ms"]["successful"]["median"]
    want_ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]["median"]
    assert guidellm_median(itl, [r["output_tokens"] - 1 for r in reqs]) == want_itl
    assert guidellm_median(ttft) == want_ttft
    assert statistics.median(itl) != pytest.approx(want_itl, rel=1e-4)  # the mean of the two middle values
    # its ITL is from the first token's chunk to the last, not to the end of the request
    for r in reqs:
        t = r["info"]["timings"]
        assert r["inter_token_latency_ms"] == pytest.approx(
            1000 * (t["last_token_iteration"] - t["first_token_iteration"]) / (r["output_tokens"] - 1))
        assert t["request_end"] > t["last_token_iteration"]
    assert guidellm_median([3.0, 1.0, 2.0]) == 2.0 and guidellm_median([1.0, 2.0, 3.0, 4.0]) == 2.0
    assert guidellm_median([1.0, 2.0], [1.0, 3.0]) == 2.0 and guidellm_median([]) is None
