"""Prometheus text read by prometheus_client, the daemon's own /metrics written by it.

The llama-server case reads a real server's ``/metrics`` (tests/conftest.py);
the odd exposition cases (timestamps, escaped labels, a garbage line) are
text, since no real server is needed to hold a string.
"""

from __future__ import annotations

from cardproof.daemon.backends.http import parse_prometheus

REAL_SHAPE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 12
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
"""


def test_names_lose_the_prefix_and_keep_the_total_suffix():
    assert parse_prometheus(REAL_SHAPE) == {"prompt_tokens_total": 12.0, "requests_processing": 1.0}


def test_a_timestamp_is_not_the_value():
    """The hand parser took the last field of a line: with a timestamp that was the time, not the count."""
    out = parse_prometheus("# TYPE llamacpp:tokens_predicted_total counter\n"
                           "llamacpp:tokens_predicted_total 42 1700000000000\n")
    assert out == {"tokens_predicted_total": 42.0}


def test_labels_with_spaces_and_escapes_stay_one_sample():
    out = parse_prometheus('requests{path="/v1/chat completions",q="a\\"b"} 3\n')
    assert out == {'requests{path="/v1/chat completions",q="a\\"b"}': 3.0}


def test_infinite_and_nan_values_are_left_out():
    out = parse_prometheus('h_bucket{le="+Inf"} 3\nh_sum +Inf\nh_count NaN\nok_total 2\n')
    assert out == {'h_bucket{le="+Inf"}': 3.0, "ok_total": 2.0}


def test_a_garbage_line_is_skipped_and_the_rest_is_read():
    text = REAL_SHAPE + "this is not a sample\n\x00\xff{{{\nllamacpp:tokens_predicted_total 7\n"
    assert parse_prometheus(text) == {"prompt_tokens_total": 12.0, "requests_processing": 1.0,
                                      "tokens_predicted_total": 7.0}


def test_a_real_llama_server_metrics_endpoint(llama_server):
    from cardproof.daemon.backends import make_backend

    backend = make_backend("llama-server", llama_server.url, 30)
    try:
        backend.load("tiny-a")
        metrics = backend.metrics("tiny-a")
    finally:
        backend.close()
    assert "tokens_predicted_total" in metrics and "prompt_tokens_total" in metrics
    assert all(isinstance(v, float) for v in metrics.values())
