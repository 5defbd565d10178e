"""The stream readers break lines only at CR, LF or CRLF, wherever the network cuts the bytes.

Over bytes in memory: split_lines (Ollama's NDJSON, any chunking) and
sse_payloads (httpx-sse's event reader inside a size budget) on an
httpx.Response built from the chunks. The end-to-end cases (a server writing one byte at a time,
answers holding U+2028, U+2029, U+0085) are in test_malformed_answers.py.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardproof.daemon.backends.base import BackendError
from cardproof.daemon.backends.http import split_lines, sse_payloads

SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"  # str.splitlines() breaks at each of these


def _stream(chunks: list[bytes], ctype: str = "text/event-stream") -> httpx.Response:
    return httpx.Response(200, headers={"content-type": ctype}, content=iter(chunks))


def _cut(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in points})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:])]


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)))
                      | st.sampled_from(["a\u2028b", "\u2029", "x\u0085y", "é€😀", ""]), min_size=1, max_size=8),
       eol=st.sampled_from(["\n", "\r\n", "\r"]), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_gives_back_the_lines_and_no_other_separator_breaks_one(lines, eol, cuts):
    data = eol.join(lines).encode("utf-8") + eol.encode()
    assert list(split_lines(_cut(data, cuts))) == lines


def test_a_line_separator_inside_a_json_string_keeps_the_chunk_whole():
    payload = json.dumps({"choices": [{"delta": {"content": "a" + SEPARATORS + "b"}}]}, ensure_ascii=False)
    data = f"data: {payload}\n\n".encode()
    # httpx's own splitter cuts this line (the reason this reader exists)
    assert len(list(httpx.Response(200, content=data).iter_lines())) > 2
    for size in (1, 2, 3, 7, len(data)):
        events = list(sse_payloads(_stream(_cut(data, list(range(size, len(data), size))))))
        assert events == [payload]
        assert json.loads(events[0])["choices"][0]["delta"]["content"] == "a" + SEPARATORS + "b"


def test_a_crlf_cut_between_its_two_bytes_is_one_line_break():
    assert list(split_lines([b"data: 1\r", b"\ndata: 2\r", b"\r", b"\n"])) == ["data: 1", "data: 2", ""]


def test_a_multibyte_character_cut_across_chunks_stays_whole_and_bad_bytes_are_replaced():
    euro = "€".encode()
    assert list(split_lines([b"a" + euro[:1], euro[1:2], euro[2:] + b"\n"])) == ["a€"]
    assert list(split_lines([b"a\xff\xfeb\n"])) == ["a\ufffd\ufffdb"]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_sse_fields_comments_multi_line_data_and_an_unterminated_last_event(eol, size):
    lines = [": keep-alive", "event: error", "data:{\"a\":", "data: 1}", "", "data: 2", "id: 7", "retry: 5",
             "data", "", "", "data: [DONE]"]
    data = eol.join(lines).encode()
    got = list(sse_payloads(_stream(_cut(data, list(range(size, len(data), size))))))
    # multi-line data joined by LF; the empty line after an event with an id carries no event
    assert got == ['{"a":\n1}', "2\n", "[DONE]"]


def test_an_event_that_never_ends_is_refused_before_it_fills_memory():
    endless = (b"data: x\n" for _ in range(10_000))  # lines, but never the empty line that ends an event
    with pytest.raises(BackendError, match="stream event longer than 1000 characters"):
        list(sse_payloads(_stream(endless), max_chars=1000))
    with pytest.raises(BackendError, match="stream event longer than 1000 characters"):
        list(sse_payloads(_stream(b"data: " + b"x" * 300 for _ in range(10)), max_chars=1000))


def test_events_within_the_budget_pass_however_the_event_end_is_cut():
    event = b"data: " + b"x" * 90 + b"\r\n\r\n"
    data = event * 50  # 5,000 characters in all, 98 per event
    for size in (1, 3, 7, 97):
        got = list(sse_payloads(_stream(_cut(data, list(range(size, len(data), size)))), max_chars=100))
        assert got == ["x" * 90] * 50


def test_a_stream_of_another_content_type_is_a_protocol_error():
    with pytest.raises(BackendError, match="not an event stream.*text/html"):
        list(sse_payloads(_stream([b"data: 1\n\n"], ctype="text/html")))


def test_a_line_that_never_ends_is_refused_before_it_fills_memory():
    with pytest.raises(BackendError, match="longer than 1000 characters"):
        list(split_lines((b"x" * 300 for _ in range(10)), max_chars=1000))
