"""What the store keeps as JSON is standard JSON, and an ERROR verdict names the field and value behind it.

A real probe (reasoning) asks a scripted server on 127.0.0.1
(tests/malformed_server.py) that answers the way no server does on purpose:
timings holding ``NaN`` and ``Infinity`` (Python's json module reads them,
SQLite's and every other reader refuse them), and a JSON answer cut off in the
middle of its content. The rows are read back with SQLite's own JSON
functions and the report's damage check.
"""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from cardproof.daemon.backends import make_backend
from cardproof.daemon.campaign.model import ProbeSettings
from cardproof.daemon.run.probes import run_model_probes
from cardproof.daemon.store import dumps, json_text, open_store
from cardproof.report.probes import probe_summaries
from cardproof.report.tolerance import find_damage
from malformed_server import GOOD_TIMINGS, Answer, FakeServer, whole

CUT = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"The ball costs 5 cents. ANSWER: '


def test_non_finite_numbers_are_stored_as_null_with_a_note():
    text = dumps({"responses": [{"timings": {"prompt_per_second": float("nan"), "n": 3}}],
                  "worst": float("-inf"), "best": float("inf"), "ok": 1.5})
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON: {c}"))
    assert doc["responses"][0]["timings"] == {"prompt_per_second": None, "n": 3} and doc["ok"] == 1.5
    assert doc["_non_finite"] == {"responses[0].timings.prompt_per_second": "NaN", "worst": "-Infinity",
                                  "best": "Infinity"}
    # a list has no place for the note, a finite value is written exactly as json.dumps writes it
    assert json_text([1.0, float("nan")]) == "[1.0, null]"
    assert json_text({"a": [1, 2.5]}, sort_keys=True) == json.dumps({"a": [1, 2.5]}, sort_keys=True)


def test_a_row_with_a_dict_value_is_stored_as_standard_json(tmp_path):
    store = open_store(tmp_path / "s.db")
    try:
        cid = store.insert("campaigns", {"name": "c", "sha256": "0" * 64, "toml_text": "", "registered_at": "x"})
        rid = store.insert("runs", {"campaign_id": cid, "status": "running", "gpus_json": {"power_w": float("nan")}})
        store.update("runs", rid, {"server_props_json": {"speed": float("inf")}})
        row = store.db.execute("select json_valid(gpus_json), json_valid(server_props_json) from runs").fetchone()
    finally:
        store.close()
    assert row == (1, 1)


def _bad_timings() -> Answer:
    timings = GOOD_TIMINGS | {"prompt_per_second": "RAW:nan", "predicted_per_second": "RAW:inf"}
    return whole({"role": "assistant", "content": "ANSWER: 5"}, timings=timings, raw={"nan": "NaN", "inf": "Infinity"})


def test_a_probe_answer_with_nan_and_a_cut_off_answer_are_kept_and_named(tmp_path):
    store = open_store(tmp_path / "p.db")
    cid = store.insert("campaigns", {"name": "u", "sha256": "0" * 64, "toml_text": "", "registered_at": "2026-01-01"})
    run_id = store.insert("runs", {"campaign_id": cid, "status": "running", "started_at": "2026-01-01"})
    model_id = store.insert("models", {"name": "fake-model", "digest": "d"})
    answers = [_bad_timings(), Answer(CUT, ctype="application/json")] + [
        whole({"role": "assistant", "content": "ANSWER: 5"}) for _ in range(4)]
    try:
        with FakeServer(answers) as srv:
            backend = make_backend("llama-server", srv.url, 20.0)
            run_model_probes(store, backend, SimpleNamespace(probes=ProbeSettings(run=("reasoning",), repeat=1)),
                             run_id, "fake-model", model_id, echo=lambda s: None)
        conn = store.db.conn
        rows = conn.execute("select variant, verdict, arm, exchange_json, detail_json, json_valid(exchange_json), "
                            "json_valid(detail_json) from probe_results order by id").fetchall()
        warned = io.StringIO()
        damage = find_damage(conn, lambda s: warned.write(s + "\n"))
        summaries = probe_summaries(store.db, run_id)
    finally:
        store.close()
    assert len(rows) == 6 and all(r[5] == 1 and r[6] == 1 for r in rows), [r[:3] for r in rows]
    assert not [k for k in damage if k[0] == "probe_results"], warned.getvalue()
    # the NaN answer: its timings kept, each non-finite value null and named
    nan = json.loads(rows[0][3])
    assert nan["responses"][0]["timings"]["prompt_per_second"] is None
    assert nan["_non_finite"] == {"responses[0].timings.prompt_per_second": "NaN",
                                  "responses[0].timings.predicted_per_second": "Infinity"}
    # the cut-off answer: ERROR, and its detail says which field, where it stopped and what it held there
    variant, verdict, arm, _, detail, _, _ = rows[1]
    detail = json.loads(detail)
    assert (verdict, arm) == ("ERROR", "request_failed:protocol")
    at = CUT.index(b'"The ball')  # the parser stops at the start of the string that never ends
    assert (detail["field"], detail["key"], detail["at_char"], detail["length"]) == ("body", "content", at, len(CUT))
    assert detail["reason"].startswith("Unterminated string") and detail["value"].endswith("ANSWER: ")
    # the report keeps every row and shows the named field with the error
    (model,) = summaries
    (probe,) = model["probes"]
    shown = {e["variant"]: e for e in probe["results"]}
    assert len(shown) == 6
    assert shown[variant]["error"].startswith(f'body at character {at} of {len(CUT)}, in "content": ')


def test_a_fit_checks_buffers_from_a_log_number_past_float_range_are_stored_as_standard_json(tmp_path):
    """A log line's figure of 400 digits once read as infinity (``float``) and the fit check wrote it into
    ``buffers_json`` as ``Infinity``, which SQLite's JSON functions and the report refuse. The parsers now
    give no fact for such a number; and an infinite figure that reaches the fit check all the same is
    stored as standard JSON: every JSON column the fit check, the variants and the log import write
    goes through ``store.json_text``."""
    from cardproof.daemon.run.load import fit
    from cardproof.daemon.logs.fit_evidence import judge, read_lines

    ev = read_lines([(1, "load_tensors: offloaded 33/33 layers to GPU"),
                     (2, "load_tensors:        CUDA0 model buffer size =  1000.00 MiB"),
                     (3, f"llama_kv_cache:        CPU KV buffer size = {'9' * 400}.00 MiB")])
    assert "CPU" not in ev.buffers  # no fact from the line
    ev.buffers["CPU"] = {"kv_buffer_mib": float("inf")}  # as if from elsewhere
    verdict = judge(ev, context_tokens=4096, load_error=None, request_error=None, card_readable=True)
    store = open_store(tmp_path / "f.db")
    try:
        cid = store.insert("campaigns", {"name": "f", "sha256": "0" * 64, "toml_text": "", "registered_at": "x"})
        run_id = store.insert("runs", {"campaign_id": cid, "status": "running", "started_at": "2026-01-01"})
        model_id = store.insert("models", {"name": "fake-model", "digest": "d"})
        row = {"run_id": run_id, "model_id": model_id, "position": 0, "context_tokens": 4096, "started_at": "x",
               "server_args_json": "[]"}
        fit._fill(row, ev, {}, None)
        fit._store(store, row, verdict.verdict, verdict.reasons, verdict.missing, ev)
        cols = [c for c in store.db["fit_checks"].columns_dict if c.endswith("_json")]
        valid = store.db.execute(f"select {', '.join(f'json_valid({c})' for c in cols)} from fit_checks").fetchone()
        buffers = json.loads(store.db.execute("select buffers_json from fit_checks").fetchone()[0])
    finally:
        store.close()
    assert dict(zip(cols, valid)) == {c: 1 for c in cols}
    assert buffers["CPU"]["kv_buffer_mib"] is None and buffers["_non_finite"] == {"CPU.kv_buffer_mib": "Infinity"}
