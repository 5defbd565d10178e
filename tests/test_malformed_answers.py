"""Malformed server answers become exception samples that name the field; the run and the build go on.

The server is a fake OpenAI-compatible one on 127.0.0.1 (tests/malformed_server.py):
no real server sends these answers on purpose. Everything else is real: the
``cardproof run`` command and ``run_campaign``, the backends over HTTP, SQLite,
``cardproof report build`` with ``mkdocs build --strict``.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from malformed_server import (GOOD_TIMINGS, GOOD_USAGE, Answer, FakeServer, campaign, llama_stream, openai_stream,
                              sse, whole)

T = GOOD_TIMINGS
HUGE = "1" + "0" * 400

# (label, answer, None for a measured sample or the texts its error must hold)
LLAMA_CASES = [
    ("good", llama_stream(), None),
    ("rate as markup", llama_stream(timings=T | {"predicted_per_second": "<b>x</b>"}),
     ["timings.predicted_per_second is not a number: '<b>x</b>'"]),
    ("rate as numeric text", llama_stream(timings=T | {"prompt_per_second": "1200.5"}),
     ["timings.prompt_per_second is not a number: '1200.5'"]),
    ("timings null", llama_stream(timings="RAW:t", raw={"t": "null"}), ["without a timings object"]),
    ("timings a list", llama_stream(timings=[1, 2]), ["timings is not an object: [1, 2]"]),
    ("timings text", llama_stream(timings="x"), ["timings is not an object: 'x'"]),
    ("required counter null", llama_stream(timings=T | {"predicted_n": None}),
     ["timings.predicted_n is not a number: null"]),
    ("required counter missing", llama_stream(timings={k: v for k, v in T.items() if k != "predicted_n"}),
     ["timings.predicted_n is missing"]),
    ("content a number", llama_stream(delta={"content": 42}), ["choices[0].delta.content is not text: 42"]),
    ("reasoning a list", llama_stream(delta={"content": "a", "reasoning_content": ["b"]}),
     ["choices[0].delta.reasoning_content is not text: [\"b\"]"]),
    ("delta text", llama_stream(delta="x"), ["choices[0].delta is not an object: 'x'"]),
    ("choices an object", llama_stream(choices={"a": 1}), ["choices is not a list: {\"a\": 1}"]),
    ("choice text", llama_stream(choices=["x"]), ["choices[0] is not an object: 'x'"]),
    ("finish reason a number", llama_stream(finish=7), ["choices[0].finish_reason is not text: 7"]),
    ("huge integer", llama_stream(timings=T | {"predicted_n": "RAW:h"}, raw={"h": HUGE}),
     ["timings.predicted_n is out of range: an integer of 1329 bits"]),
    ("huge integer in a rate", llama_stream(timings=T | {"predicted_ms": "RAW:h"}, raw={"h": HUGE}),
     ["timings.predicted_ms is out of range"]),
    ("overflowing float", llama_stream(timings=T | {"prompt_per_second": "RAW:f"}, raw={"f": "1e999"}),
     ["timings.prompt_per_second is not a finite number: Infinity"]),
    ("negative count", llama_stream(timings=T | {"predicted_n": -5}), ["timings.predicted_n is out of range: -5"]),
    ("bool count", llama_stream(timings=T | {"predicted_n": True}), ["timings.predicted_n is not a number: true"]),
    ("fractional count", llama_stream(timings=T | {"prompt_n": 12.5}), ["timings.prompt_n is not a whole number: 12.5"]),
    ("cache counter text", llama_stream(timings=T | {"cache_n": "0"}), ["timings.cache_n is not a number: '0'"]),
    ("draft counter object", llama_stream(timings=T | {"draft_n": {}}), ["timings.draft_n is not a number: {}"]),
    ("usage counter text", llama_stream(usage={"prompt_tokens": "x"}), ["usage.prompt_tokens is not a number: 'x'"]),
    ("chunk an array", Answer(sse("[1, 2, 3]")), ["stream chunk is not an object: [1, 2, 3]"]),
    ("chunk a number", Answer(sse("5")), ["stream chunk is not an object: 5"]),
    ("chunk nested too deep", Answer(sse("[" * 100000 + "]" * 100000)), ["unreadable stream chunk"]),
    ("whole body, bad timings", whole(timings=T | {"predicted_ms": "30"}),
     ["timings.predicted_ms is not a number: '30'"]),
    ("whole body, content a number", whole(message={"content": 5}, timings=T),
     ["choices[0].message.content is not text: 5"]),
    # answers that are odd but readable: measured
    ("null rate", llama_stream(timings=T | {"predicted_per_second": None}), None),
    ("whole body", whole(timings=T), None),
    ("U+2028 in the answer, one byte per write", llama_stream("a\u2028b", piece=1), None),
    ("U+2029 in the answer, CRLF lines", llama_stream("a\u2029b", eol="\r\n"), None),
    ("U+0085 in the answer, CR lines, one byte per write", llama_stream("a\u0085b", eol="\r", piece=1), None),
    ("all three and a split multi-byte char", llama_stream("x\u2028\u2029\u0085é€", piece=3), None),
    ("good again", llama_stream(), None),
]

OPENAI_CASES = [
    ("good", openai_stream("one two three"), None),
    ("completion count as text", openai_stream(usage=GOOD_USAGE | {"completion_tokens": "12"}),
     ["usage.completion_tokens is not a number: '12'"]),
    ("usage a list", openai_stream(usage=[1]), ["usage is not an object: [1]"]),
    ("usage text", openai_stream(usage="<b>x</b>"), ["usage is not an object: '<b>x</b>'"]),
    ("huge prompt count", openai_stream(usage=GOOD_USAGE | {"prompt_tokens": "RAW:h"}, raw={"h": HUGE}),
     ["usage.prompt_tokens is out of range: an integer of 1329 bits"]),
    ("overflowing count", openai_stream(usage=GOOD_USAGE | {"completion_tokens": "RAW:f"}, raw={"f": "1e999"}),
     ["usage.completion_tokens is not a finite number: Infinity"]),
    ("bool count", openai_stream(usage=GOOD_USAGE | {"completion_tokens": False}),
     ["usage.completion_tokens is not a number: false"]),
    ("negative count", openai_stream(usage=GOOD_USAGE | {"prompt_tokens": -1}),
     ["usage.prompt_tokens is out of range: -1"]),
    ("cached count text", openai_stream(usage=GOOD_USAGE | {"prompt_tokens_details": {"cached_tokens": "x"}}),
     ["usage.prompt_tokens_details.cached_tokens is not a number: 'x'"]),
    ("details a list", openai_stream(usage=GOOD_USAGE | {"prompt_tokens_details": [0]}),
     ["usage.prompt_tokens_details is not an object: [0]"]),
    ("content a number", openai_stream(delta={"content": 42}), ["choices[0].delta.content is not text: 42"]),
    ("reasoning an object", openai_stream(delta={"reasoning": {}}), ["choices[0].delta.reasoning is not text: {}"]),
    ("whole body, content a list", whole(message={"content": ["a"]}, usage=GOOD_USAGE),
     ["choices[0].message.content is not text: [\"a\"]"]),
    ("whole body, negative usage", whole(usage=GOOD_USAGE | {"completion_tokens": -3}),
     ["usage.completion_tokens is out of range: -3"]),
    ("timings passed through, as markup", llama_stream(timings=T | {"predicted_per_second": "<b>x</b>"}),
     ["timings.predicted_per_second is not a number: '<b>x</b>'"]),
    ("whole body", whole(usage=GOOD_USAGE), None),
    ("U+2028 in the answer, one byte per write", openai_stream("a\u2028b c\u2029d e\u0085f", piece=1), None),
    ("good again", openai_stream("four five"), None),
]

NUMERIC = ("INTEGER", "FLOAT", "REAL")


def _run(store, server: FakeServer, backend: str, n: int):
    camp = parse_campaign(campaign(server.url, backend, n), f"malformed-{backend}.toml")
    lines: list[str] = []
    return run_campaign(store, camp, echo=lines.append), lines


def _check_samples(store, run_id: int, cases) -> None:
    rows = list(store.db.query(
        "select repetition, error_kind, error_text, response_json from samples where run_id = ? and kind = 'measure' "
        "order by repetition", [run_id]))
    assert len(rows) == len(cases)
    for row, (label, _, expected) in zip(rows, cases):
        if expected is None:
            assert row["error_kind"] is None, (label, row["error_text"])
        else:
            assert row["error_kind"] == "protocol", (label, row["error_kind"], row["error_text"])
            for text in expected:
                assert text in row["error_text"], (label, row["error_text"])


def _non_numbers(store) -> list[tuple]:
    """Every value in a numeric column of samples that SQLite does not hold as a number."""
    bad = []
    for col in store.db["samples"].columns:
        if col.type and col.type.upper() in NUMERIC:
            bad += [(col.name, *r) for r in store.db.execute(
                f"select id, typeof({col.name}), {col.name} from samples "
                f"where typeof({col.name}) not in ('integer', 'real', 'null')")]
    return bad


@pytest.mark.parametrize("backend, cases", [("llama-server", LLAMA_CASES), ("openai", OPENAI_CASES)],
                         ids=["llama-server", "openai"])
def test_each_malformed_answer_is_an_exception_sample_naming_field_and_value(backend, cases, tmp_path):
    store = open_store(tmp_path / "m.db")
    with FakeServer([c[1] for c in cases]) as srv:
        outcome, lines = _run(store, srv, backend, len(cases))
        assert srv.served == len(cases)  # one request per sample, none skipped
    assert (outcome.status, outcome.exit_code) == ("completed", 3), lines
    bad = sum(1 for c in cases if c[2] is not None)
    assert (outcome.measured, outcome.failed) == (len(cases) - bad, bad)
    _check_samples(store, outcome.run_id, cases)
    assert _non_numbers(store) == []
    answers = [r[0] for r in store.db.execute(
        "select json_extract(response_json, '$.answer') from samples where error_kind is null order by id")]
    for ch in ("\u2028", "\u2029", "\u0085"):
        assert any(ch in (a or "") for a in answers), repr(ch)
    if backend == "llama-server":
        assert "x\u2028\u2029\u0085é€" in answers


def test_cardproof_run_exits_3_and_report_build_succeeds_on_that_database(tmp_path):
    """The command line, start to end: run exits 3, the site builds strict, markup in an error stays text."""
    db = tmp_path / "cli.db"
    cases = LLAMA_CASES[:6]
    with FakeServer([c[1] for c in cases]) as srv:
        toml = tmp_path / "c.toml"
        toml.write_text(campaign(srv.url, "llama-server", len(cases)))
        result = CliRunner().invoke(cli, ["run", str(toml), "--db", str(db)])
    assert result.exit_code == 3, result.output
    with FakeServer([c[1] for c in OPENAI_CASES]) as srv:
        toml.write_text(campaign(srv.url, "openai", len(OPENAI_CASES)))
        result = CliRunner().invoke(cli, ["run", str(toml), "--db", str(db)])
    assert result.exit_code == 3, result.output
    store = open_store(db)
    assert [r[0] for r in store.db.execute("select status from runs order by id")] == ["completed", "completed"]
    _check_samples(store, 1, cases)
    _check_samples(store, 2, OPENAI_CASES)
    store.close()
    project = tmp_path / "site"
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 0, result.output
    runs = project / "build" / "site" / "runs"  # pages are name.html (use_directory_urls: false)
    for page in ("run-1.html", "run-1-evidence.html"):  # the article and its evidence page both show the error
        html = (runs / page).read_text()
        assert "is not a number" in html, page
        assert "<b>x</b>" not in html, page  # the server's markup is shown as text, never as markup


def test_malformed_model_listings_do_not_stop_the_run(tmp_path):
    """Entries as strings or numbers, no ``id``, ``data`` not a list, a body that is no object: the run goes on."""
    store = open_store(tmp_path / "l.db")
    listings = [
        b'{"data": ["fake-model", 5, null, {"id": 7}, {"object": "model"}, {"id": "fake-model", "status": [1]}]}',
        b'{"data": "fake-model"}',
        b'["fake-model"]',
        b'{"data": [{"id": "fake-model", "aliases": "fake-model", "status": {"value": 3, "args": 5}}]}',
    ]
    for backend in ("llama-server", "openai"):
        for listing in listings:
            with FakeServer([llama_stream(), llama_stream()], models_body=listing, props_body=b"[1, 2]") as srv:
                outcome, lines = _run(store, srv, backend, 2)
            assert (outcome.status, outcome.exit_code, outcome.measured) == ("completed", 0, 2), (backend, listing,
                                                                                                   lines)
    props = [r[0] for r in store.db.execute("select server_props_json from runs where backend = 'llama-server'")]
    assert all("props_error" in p and "[1, 2]" in p for p in props)


def test_a_backend_that_raises_something_unexpected_costs_one_sample_not_the_run(tmp_path):
    """The one test double here: a real OpenAI backend whose second request raises a bug's exception.

    No server answer reaches past the backend's checks, so an unexpected
    exception type can only come from a bug; the runner must store it as an
    exception sample and go on. An interrupt, however, still stops the run.
    """
    from cardproof.daemon.backends.openai import OpenAICompatBackend

    class Buggy(OpenAICompatBackend):
        calls = 0
        fail_with: BaseException = ZeroDivisionError("division by zero")

        def chat(self, *a, **kw):
            Buggy.calls += 1
            if Buggy.calls == 2:
                raise self.fail_with
            return super().chat(*a, **kw)

    store = open_store(tmp_path / "b.db")
    with FakeServer([openai_stream(), openai_stream()]) as srv:
        camp = parse_campaign(campaign(srv.url, "openai", 3), "b.toml")
        backend = Buggy(srv.url, timeout_s=20)
        outcome = run_campaign(store, camp, echo=lambda s: None, backend=backend)
    assert (outcome.status, outcome.exit_code, outcome.measured, outcome.failed) == ("completed", 3, 2, 1)
    row = store.db.execute("select error_kind, error_text from samples where repetition = 2").fetchone()
    assert row == ("internal", "ZeroDivisionError: division by zero")

    Buggy.calls, Buggy.fail_with = 0, KeyboardInterrupt()
    with FakeServer([openai_stream(), openai_stream()]) as srv:
        camp = parse_campaign(campaign(srv.url, "openai", 3), "b.toml")
        outcome = run_campaign(store, camp, echo=lambda s: None, backend=Buggy(srv.url, timeout_s=20))
    assert (outcome.status, outcome.exit_code) == ("interrupted", 130)


# Ollama: its recorded answers (tests/fixtures/ollama) with one field damaged per request
OLLAMA_CASES = [
    ("good", {}, None, None),
    ("eval count as text", {"eval_count": "18"}, None, ["eval_count is not a number: '18'"]),
    ("duration as markup", {"eval_duration": "<b>x</b>"}, None, ["eval_duration is not a number: '<b>x</b>'"]),
    ("huge duration", {"prompt_eval_duration": "RAW:h"}, None, ["prompt_eval_duration is out of range"]),
    ("negative count", {"prompt_eval_count": -11}, None, ["prompt_eval_count is out of range: -11"]),
    ("bool load duration", {"load_duration": True}, None, ["load_duration is not a number: true"]),
    ("done reason a list", {"done_reason": ["stop"]}, None, ['done_reason is not text: ["stop"]']),
    ("content a number", {}, {"message": {"role": "assistant", "content": 7}}, ["message.content is not text: 7"]),
    ("message a list", {}, {"message": [1]}, ["message is not an object: [1]"]),
    ("stream line an array", {}, [1, 2], ["stream line is not an object: [1, 2]"]),
    ("U+2028 in the answer", {}, {"message": {"role": "assistant", "content": "a\u2028b\u2029c\u0085d"}}, None),
    ("good again", {}, None, None),
]


def test_each_malformed_ollama_answer_is_an_exception_sample_naming_field_and_value(tmp_path):
    """Recorded Ollama answers (no Ollama binary here) with one field damaged per request, over real HTTP."""
    from malformed_server import raw_json
    from recorded_servers import RecordedOllama, recorded

    class DamagedOllama(RecordedOllama):
        def __init__(self):
            super().__init__()
            self.script = list(OLLAMA_CASES)

        def route(self, h, method, path, body):
            if path == "/api/ps" and self.loaded:
                ps = self._ps()
                ps["models"].insert(0, "not an entry")  # a listing entry of the wrong kind is passed over
                return h._send(200, ps)
            if path != "/api/chat":
                return super().route(h, method, path, body)
            _, final_fix, chunk, _ = self.script.pop(0)
            self.loaded.add(body["model"])
            final = raw_json(recorded("ollama", "chat_final.json") | {"model": body["model"]} | final_fix,
                             {"h": HUGE})
            first = raw_json(recorded("ollama", "chat_chunk.json") | (chunk if isinstance(chunk, dict) else {})
                             if not isinstance(chunk, list) else chunk)
            return h._stream([first.encode() + b"\n", final.encode() + b"\n"], "application/x-ndjson")

    store = open_store(tmp_path / "o.db")
    with DamagedOllama() as srv:
        camp = parse_campaign(campaign(srv.url, "ollama", len(OLLAMA_CASES), model="gemma4"), "o.toml")
        outcome = run_campaign(store, camp, echo=lambda s: None)
    assert (outcome.status, outcome.exit_code) == ("completed", 3)
    _check_samples(store, outcome.run_id, [(c[0], None, c[3]) for c in OLLAMA_CASES])
    assert _non_numbers(store) == []
    answers = [r[0] for r in store.db.execute(
        "select json_extract(response_json, '$.answer') from samples where error_kind is null")]
    assert "a\u2028b\u2029c\u0085d" in answers
