"""A classic draft model (-md) in every log form, and a load that dies before it is ready.

Lines in the forms real servers print: mainline's quoted path, the 2024
builds' and ik_llama.cpp's ``| key="value"`` fields, their JSON log; the
MLA cache line of ik_llama.cpp (tests/fixtures/logs/real/ik-llama-pr645-...).
Real SQLite for the import cases.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.logs import import_path, load_summaries
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.store import open_store


def _facts(text):
    return {f.name: f.value_text for f in parse_line(text)}


@pytest.mark.parametrize("line, path", [
    ("srv    load_model: loading draft model '/m/draft 0.6B.gguf'", "/m/draft 0.6B.gguf"),
    ("common_speculative_init_result: loading draft model '/m/d.gguf'", "/m/d.gguf"),
    ('INFO [              load_model] loading draft model | tid="130964736602112" timestamp=1753532513 '
     'model="/home/u/DeepSeek-R1-DRAFT-0.6B-128k-Q4_0.gguf"', "/home/u/DeepSeek-R1-DRAFT-0.6B-128k-Q4_0.gguf"),
    ('{"tid":"1","timestamp":1717000000,"level":"INFO","function":"load_model","line":1,'
     '"msg":"loading draft model","model":"/m/d.gguf"}', "/m/d.gguf"),
])
def test_draft_model_path_in_every_form(line, path):
    assert _facts(line)["draft_model"] == path


@pytest.mark.parametrize("line", [
    'ERR [              load_model] failed to load draft model | tid="1" timestamp=1 model="/m/d.gguf"',
    'INFO [              load_model] loading draft model | tid="1" model=""',
    'INFO [              load_model] loading draft model | tid="1" n_model=3',
    "loading draft model",
])
def test_no_draft_model_where_none_is_named_or_it_failed(line):
    assert "draft_model" not in _facts(line)


def test_mla_cache_type_is_the_k_type_and_no_v_type_is_made_up():
    f = _facts("llama_new_context_with_model: KV self size  =  583.31 MiB, c^KV (q8_0):  583.31 MiB, kv^T: not used")
    assert f.get("kv_cache_type_k") == "q8_0" and "kv_cache_type_v" not in f
    f = _facts("llama_new_context_with_model: KV self size  =  147.00 MiB, K (q8_0):   51.00 MiB, V (f16):   96.00 MiB")
    assert (f["kv_cache_type_k"], f["kv_cache_type_v"]) == ("q8_0", "f16")


START = [
    'INFO [                    main] build info | tid="1" timestamp=1753532241 build=3841 commit="e938d9f6"',
    "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from /m/target.gguf "
    "(version GGUF V3 (latest))",
    "llm_load_tensors: offloaded 25/25 layers to GPU",
]
ASSERT = "/src/ggml/src/ggml-cuda/mmvq.cu:604: GGML_ASSERT(src0->ne[2] == src1->ne[2]) failed"


@pytest.mark.parametrize("ready, status", [(False, "failed"), (True, "loaded")])
def test_a_crash_before_the_model_is_ready_is_a_failed_load(tmp_path, ready, status):
    lines = START + (['INFO [                    main] model loaded | tid="1" timestamp=1753532600'] if ready else [])
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines + [ASSERT, "Aborted (core dumped)"]) + "\n")
    store = open_store(tmp_path / "s.db")
    try:
        import_path(store, log)
        (ld,) = load_summaries(store.db)
    finally:
        store.close()
    assert ld["status"] == status
    assert ld["end_reason"].startswith("crashed: GGML_ASSERT(") and ld["open"] is False
