"""Third-party server logs (tests/fixtures/logs/real/): every hand-read fact, load and line range.

The expectations below were written by reading each log (its README says
what each shows and where it comes from), not by running the parser: which
lines belong to which load (every other line belongs to none), the facts the
lines state, the requests the server counted itself, the access lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path, load_summaries
from cardproof.daemon.store import open_store

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
NONE = []  # no load in the log


def _l(model, file, lines, *, open_, end=None, status=None, facts=None, observed=(), port=None):
    return {"model": model, "file": file, "lines": lines, "open": open_, "end": end, "status": status,
            "facts": facts or {}, "observed": list(observed), "port": port}


CORPUS = {
    "poseidon-rocm-then-cpu.log": {
        "lines": 125, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("gemma-3-1b-it-Q4_0.gguf", "/home/racek/Projects/Poseidon/models/gemma-3-1b-it-Q4_0.gguf",
               [(8, 61)], open_=False, end="process exit", status="loaded",
               # no llama_context n_ctx line: the context is stated from the 4 slots of a unified cache
               facts={"slots": 4, "slot_ctx_size": 8192, "kv_unified": "true", "ctx_size": 8192,
                      "spec_type": "none", "load_seconds": 0.886130},
               observed=[(19, 26.59, 12, 64.75)]),
            _l("gemma-3-1b-it-Q4_0.gguf", "/mnt/870Ext/sync/programming/Poseidon/models/gemma-3-1b-it-Q4_0.gguf",
               [(69, 125)], open_=False, end="process exit", status="loaded",
               facts={"slots": 4, "slot_ctx_size": 8192, "kv_unified": "true", "ctx_size": 8192,
                      "spec_type": "none", "load_seconds": 0.803788},
               observed=[(19, 123.02, 16, 351.14)]),
        ]},
    "local-llama-failed-load.log": {
        "lines": 17, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("models", "/Users/thomas/Coding/personal/local-llama/scripts/../models/", [(1, 17)], open_=False,
               end="exit after the model failed to load", status="failed"),
        ]},
    "ollama-0.24-cpu.log": {
        "lines": 193, "requests": 4, "observed_unplaced": [],
        "loads": [
            _l("sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa",
               "/villa/rhh25/.ollama/models/blobs/sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa",
               [(71, 193)], open_=True, status="loaded", port=40561,
               facts={"plan_weights_mib": {"CPU": 4.1 * 1024}, "plan_kv_mib": {"CPU": 2048.0},
                      "plan_total_mib": 6.1 * 1024, "ctx_size": 16384, "slots": 4,
                      "model_buffer_mib": {"CPU": 4437.80}, "kv_buffer_mib": {"CPU": 2048.00},
                      "kv_cache_type_k": "f16", "kv_cache_type_v": "f16", "compute_buffer_mib": {"CPU": 258.50},
                      "output_buffer_mib": {"CPU": 2.02}, "load_seconds": 15.37}),
        ]},
    "llama-runner-metal-2026.log": {
        "lines": 333, "requests": 2, "observed_unplaced": [],
        "loads": [
            _l("gemma-4-E4B-it-Q8_0.gguf",
               "/Users/acdtrx/.cache/huggingface/hub/models--unsloth--gemma-4-E4B-it-GGUF/snapshots/"
               "ce152932ac27bc40bc9c727386760424d50bb456/gemma-4-E4B-it-Q8_0.gguf",
               [(1, 333)], open_=True, status="loaded",
               facts={"offloaded_layers": 43, "total_layers": 43,
                      "model_buffer_mib": {"CPU_Mapped": 680.00, "MTL0_Mapped": 7798.32},
                      "ctx_size": 65536, "slot_ctx_size": 65536, "slots": 1,
                      "kv_buffer_mib": {"MTL0": 1024.00}, "kv_swa_buffer_mib": {"MTL0": 40.00},
                      "kv_cache_type_k": "f16", "kv_cache_type_v": "f16",
                      "compute_buffer_mib": {"MTL0": 517.50, "CPU": 140.02},
                      "projector_compute_mib": {"MTL0": 101.27, "CPU": 6.77},
                      "output_buffer_mib": {"CPU": 1.00}, "spec_type": "none"},
               observed=[(1331, 3565.84, 62, 3297.85), (4914, 13931.70, 717, 40400.49)]),
        ]},
    "ik-llama-pr237-15x3090.log": {
        "lines": 260, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("DeepSeek-R1-11446-Q2_K-00001-of-00030.gguf",
               "/models/gghfez_DeepSeek-R1-11446-Q2_K/DeepSeek-R1-11446-Q2_K-00001-of-00030.gguf",
               [(1, 260)], open_=True,
               facts={"offloaded_layers": 62, "total_layers": 62, "ctx_size": 163840,
                      "model_buffer_mib": {"CPU": 289.98, "CUDA0": 12615.77, **{f"CUDA{i}": 15965.27 for i in range(1, 14)},
                                           "CUDA14": 12698.93},
                      "kv_buffer_mib": {"CUDA0": 1080.0, **{f"CUDA{i}": 720.0 for i in range(1, 14)}, "CUDA14": 540.0},
                      "kv_cache_type_k": "f16",  # c^KV (f16): MLA's one cache, no V type
                      "compute_buffer_mib": {**{f"CUDA{i}": 5088.02 for i in range(14)}, "CUDA14": 5088.03,
                                             "CUDA_Host": 2588.05},
                      "output_buffer_mib": {"CUDA_Host": 0.99}}),
        ]},
    # classic speculative decoding: -md with a 0.6B draft model (read by hand, README); it aborts on an
    # assert after both contexts are made, before it serves anything: no requests, no draft acceptance
    "ik-llama-pr645-draft-model-assert.log": {
        "lines": 543, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("DeepSeek-R1-0528-UD-Q3_K_XL-00001-of-00007.gguf",
               "/home/chico/.lmstudio/models/unsloth/DeepSeek-R1-0528-GGUF/DeepSeek-R1-0528-UD-Q3_K_XL-00001-of-00007.gguf",
               [(1, 543)], open_=False, status="failed",
               end="crashed: GGML_ASSERT(src0->ne[2] == src1->ne[2] && src0->ne[2] == dst->ne[2]) failed",
               facts={"offloaded_layers": 62, "total_layers": 62, "ctx_size": 16384,
                      "model_buffer_mib": {"CPU": 233856.00, "CUDA_Host": 497.11, "CUDA0": 9925.05,
                                           "CUDA1": 18956.00, "CUDA2": 18956.00},
                      "kv_buffer_mib": {"CUDA0": 583.34}, "kv_cache_type_k": "q8_0",
                      "compute_buffer_mib": {"CUDA0": 4496.02, "CUDA1": 1272.00, "CUDA2": 1272.00,
                                             "CUDA_Host": 368.05},
                      "output_buffer_mib": {"CUDA_Host": 0.99},
                      "draft_model": "/home/chico/.lmstudio/models/jukofyork/DeepSeek-R1-DRAFT-0.6B-v2.0-GGUF/"
                                     "DeepSeek-R1-DRAFT-0.6B-128k-Q4_0.gguf",
                      "draft_offloaded_layers": 25, "draft_total_layers": 25, "draft_ctx_size": 16384,
                      "draft_model_buffer_mib": {"CPU": 62.14, "CUDA0": 120.15, "CUDA1": 48.06, "CUDA2": 141.41},
                      "draft_kv_buffer_mib": {"CUDA0": 91.88, "CUDA1": 36.75, "CUDA2": 18.38},
                      "draft_kv_cache_type_k": "q8_0", "draft_kv_cache_type_v": "f16",
                      "draft_compute_buffer_mib": {"CUDA0": 487.00, "CUDA1": 487.00, "CUDA2": 487.00,
                                                   "CUDA_Host": 33.76},
                      "draft_output_buffer_mib": {"CUDA_Host": 0.49}}),
        ]},
    # two excerpts of one ik_llama.cpp load (README): neither holds the line a load starts on
    "ik-llama-discussion753-json-system-info.log": {"lines": 7, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "ik-llama-discussion753-overriden-context.log": {
        "lines": 76, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "ik-llama-issue425-journald-cuda.log": {"lines": 9, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "llama-cpp-issue24681-compose-router.log": {"lines": 12, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "llama-cpp-issue7637-json-format.log": {
        "lines": 4, "requests": 0, "observed_unplaced": [(27, 2684.39, 25, 3559.27)], "loads": NONE},
    "llama-cpp-issue9013-info-format.log": {"lines": 6, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "llama-cpp-pr23269-router-child-timing.log": {
        "lines": 14, "requests": 1, "observed_unplaced": [(27, 789.03, 192, 16112.50)], "loads": NONE},
    "llama-swap-issue35-llama-server.log": {
        "lines": 15, "requests": 1, "observed_unplaced": [],
        "loads": [
            _l("Mistral-Small-24B-Instruct-2501-Q6_K_L.gguf", "/models/00.Models/Mistral-Small-24B-Instruct-2501-Q6_K_L.gguf",
               [(2, 15)], open_=True),
        ]},
    "ollama-issue7765-0.4-runner.log": {
        "lines": 7, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("sha256-dde5aa3fc5ffc17176b5e8bdc82f587b24b2678c6c66101bf7da77af9f7ccdff",
               "/root/.ollama/models/blobs/sha256-dde5aa3fc5ffc17176b5e8bdc82f587b24b2678c6c66101bf7da77af9f7ccdff",
               [(1, 7)], open_=True, port=39057, facts={"ctx_size": 8192, "slots": 4}),
        ]},
    "swap-laboratories-llama-swap.log": {"lines": 13, "requests": 5, "observed_unplaced": [], "loads": NONE},
    # crashes (tests/test_logs_crash.py checks each crash line): a process that dies by a signal says nothing;
    # a debugger, a script's shell, Go's os/exec or zsh says it after
    "ik-llama-issue60-gdb-sigill.log": {"lines": 52, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "llama-cpp-issue537-docker-tools-sh.log": {"lines": 16, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "ollama-issue1603-journal-sigill.log": {"lines": 5, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "ollama-issue9500-go-sigill-panic.log": {"lines": 17, "requests": 1, "observed_unplaced": [], "loads": NONE},
    # an Ollama runner's ROCm error mid-run, after its context lines (no model loader line: no load)
    "ollama-for-amd-issue37-rocm-error.log": {"lines": 18, "requests": 2, "observed_unplaced": [], "loads": NONE},
    "ollama-issue2573-windows-exception-sigill.log": {"lines": 14, "requests": 0, "observed_unplaced": [],
                                                      "loads": NONE},
    "ollama-issue630-journal-pager-sigill.log": {"lines": 11, "requests": 0, "observed_unplaced": [], "loads": NONE},
    "ik-llama-issue503-zsh-segfault.log": {
        "lines": 124, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("Qwen3-32B-UD-Q4_K_XL.gguf", "/nas/llm/unsloth/Qwen3-32B-GGUF/Qwen3-32B-UD-Q4_K_XL.gguf",
               [(2, 124)], open_=False, status="failed", end="crashed: SIGSEGV",
               facts={"offloaded_layers": 65, "total_layers": 65, "ctx_size": 16896,
                      "model_buffer_mib": {"AMD Radeon RX 7900 XTX (RADV NAVI31)": 18671.19, "CPU": 417.30},
                      "kv_cache_type_k": "q8_0", "kv_cache_type_v": "q8_0",
                      "output_buffer_mib": {"Vulkan_Host": 0.58}, "crash_signal": "SIGSEGV"}),
        ]},
    "dockerbuildfiles-qwen36-mtp-compose.log": {
        "lines": 357, "requests": 4, "observed_unplaced": [],
        "loads": [
            _l("Qwen3.6-27B-UD-Q4_K_XL.gguf",
               "/root/.cache/huggingface/hub/models--unsloth--Qwen3.6-27B-MTP-GGUF/snapshots/"
               "53b097416d6346f849b530e4bc1b5590dfe9d758/Qwen3.6-27B-UD-Q4_K_XL.gguf",
               [(1, 357)], open_=True, status="loaded",
               facts={"offloaded_layers": 66, "total_layers": 66,
                      "model_buffer_mib": {"CPU_Mapped": 682.03, "CUDA0": 16386.94},
                      "ctx_size": 131072, "slots": 4, "slot_ctx_size": 131072,
                      "kv_buffer_mib": {"CUDA0": 4352.00}, "kv_cache_type_k": "q8_0", "kv_cache_type_v": "q8_0",
                      "compute_buffer_mib": {"CUDA0": 495.00, "CUDA_Host": 276.29},
                      "output_buffer_mib": {"CUDA_Host": 3.79},
                      "draft_kv_buffer_mib": {"CUDA0": 272.00},
                      "draft_compute_buffer_mib": {"CUDA0": 495.00, "CUDA_Host": 276.28},
                      "projector_compute_mib": {"CUDA0": 248.10, "CPU": 24.93},
                      "spec_type": "mtp"},
               observed=[(133, 648.99, 2048, 30387.12), (11, 339.88, 10, 104.28)]),
        ]},
    # lines 1-8 come before build: (devices, backends, the n_parallel choice), line 329 after the exit
    # Windows (HIP build 5618): the model path in backslashes; its file name is the model's name
    "rocm-issue4903-windows-hip.log": {
        "lines": 136, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("Qwen3-Embedding-8B-Q8_0.gguf",
               "C:\\Users\\musclez\\Downloads\\llama-b5603-bin-win-hip-radeon-x64\\Qwen3-Embedding-8B-Q8_0.gguf",
               [(1, 136)], open_=True,
               facts={"offloaded_layers": 37, "total_layers": 37, "ctx_size": 40960, "flash_attn": "on",
                      "model_buffer_mib": {"ROCm0": 7668.64, "ROCm_Host": 629.47},
                      "kv_buffer_mib": {"ROCm0": 5760.00}, "kv_cache_type_k": "f16", "kv_cache_type_v": "f16",
                      "compute_buffer_mib": {"ROCm0": 1552.90, "ROCm_Host": 368.02}, "n_ubatch": 2048}),
        ]},
    "yuy4o-llm-b7342-docker-a100.log": {
        "lines": 329, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("Qwen3-Coder-30B-A3B-Instruct-Q8_0.gguf", "/models/Qwen3-Coder-30B-A3B-Instruct-Q8_0.gguf",
               [(1, 329)], open_=False, end="process exit", status="loaded",
               facts={"offloaded_layers": 49, "total_layers": 49,
                      "model_buffer_mib": {"CPU_Mapped": 315.30, "CUDA0": 30658.12},
                      "ctx_size": 65536, "kv_unified": "true", "slots": 4, "slot_ctx_size": 65536,
                      "kv_buffer_mib": {"CUDA0": 6144.00}, "kv_cache_type_k": "f16", "kv_cache_type_v": "f16",
                      "compute_buffer_mib": {"CUDA0": 300.75, "CUDA_Host": 132.01},
                      "output_buffer_mib": {"CUDA_Host": 2.32}}),
        ]},
    "dockerbuildfiles-gemma4-mtp-draft.log": {
        "lines": 129, "requests": 0, "observed_unplaced": [],
        "loads": [
            _l("gemma-4-12b-it-UD-Q4_K_XL.gguf",
               "/root/.cache/huggingface/hub/models--unsloth--gemma-4-12b-it-GGUF/snapshots/"
               "3249fa54d5efa384afc552cc6700ad091efd5c39/gemma-4-12b-it-UD-Q4_K_XL.gguf",
               [(1, 129)], open_=True, status="loaded",
               facts={"draft_model": "/root/.cache/huggingface/hub/models--unsloth--gemma-4-12b-it-GGUF/snapshots/"
                                     "3249fa54d5efa384afc552cc6700ad091efd5c39/mtp-gemma-4-12b-it.gguf",
                      "spec_type": "draft-mtp", "spec_draft_n_max": 4, "slots": 10, "slot_ctx_size": 262144,
                      "projector_mib": 354.46, "load_seconds": 8.601926},
               observed=[(22, 176.94, 90, 1313.86), (15, 154.95, 79, 1384.13)]),
        ]},
}


def test_the_corpus_is_every_file_and_at_least_twelve_logs():
    assert sorted(p.name for p in REAL.glob("*.log")) == sorted(CORPUS)
    assert len(CORPUS) >= 12


def _approx(expected):
    if isinstance(expected, dict):
        return {k: _approx(v) for k, v in expected.items()}
    if isinstance(expected, float):
        return pytest.approx(expected, abs=0.006)
    return expected


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_real_log_reads_right(name, tmp_path):
    want = CORPUS[name]
    store = open_store(tmp_path / "t.db")
    try:
        stats = import_path(store, REAL / name)
        db = store.db
        rows = db.execute("select id, load_id from log_lines order by id").fetchall()
        first = rows[0][0]
        loads = load_summaries(db)
        requests = db.execute("select count(*) from requests_seen").fetchone()[0]
        unplaced_observed = db.execute(
            "select o.prompt_tokens, o.prompt_ms, o.generated_tokens, o.decode_ms from observed_requests o "
            "join log_lines l on l.id = o.line_id where l.load_id is null order by o.id").fetchall()
    finally:
        store.close()
    assert stats["lines"] == len(rows) == want["lines"]  # nothing lost
    assert len(loads) == len(want["loads"]), [ld["model"] for ld in loads]
    # every line that belongs to a load is attributed to it, none to the wrong one, none else to any
    expected_owner = {}
    for n, exp in enumerate(want["loads"]):
        for a, b in exp["lines"]:
            for line_no in range(a, b + 1):
                expected_owner[line_no] = n
    by_load = {ld["id"]: n for n, ld in enumerate(loads)}
    got_owner = {lid - first + 1: by_load[load_id] for lid, load_id in rows if load_id is not None}
    assert got_owner == expected_owner
    assert stats["attributed"] == len(expected_owner)
    assert requests == want["requests"]
    assert [tuple(r) for r in unplaced_observed] == want["observed_unplaced"]
    for ld, exp in zip(loads, want["loads"]):
        assert (ld["model"], ld["model_file"]) == (exp["model"], exp["file"])
        assert ld["open"] is exp["open"]
        assert ld["end_reason"] == exp["end"]
        if exp["status"]:
            assert ld["status"] == exp["status"]
        if exp["port"]:
            assert ld["port"] == exp["port"]
        for fact, value in exp["facts"].items():
            assert ld["facts"].get(fact) == _approx(value), fact
        obs = ld["observed"]
        assert obs["count"] == len(exp["observed"])
        got = [(tuple(r)) for r in _observed_rows(tmp_path, ld["id"])]
        assert got == [tuple(x) for x in exp["observed"]]


def _observed_rows(tmp_path, load_id):
    store = open_store(tmp_path / "t.db")
    try:
        return store.db.execute(
            "select o.prompt_tokens, o.prompt_ms, o.generated_tokens, o.decode_ms from observed_requests o "
            "join log_lines l on l.id = o.line_id where l.load_id = ? order by o.id", [load_id]).fetchall()
    finally:
        store.close()


def test_observed_rates_are_the_servers_own_counters(tmp_path):
    """decode and prefill tok/s come from the printed counts and milliseconds, not from the wall clock."""
    store = open_store(tmp_path / "t.db")
    try:
        import_path(store, REAL / "llama-runner-metal-2026.log")
        (ld,) = load_summaries(store.db)
    finally:
        store.close()
    decode = sorted([62 / 3297.85 * 1000, 717 / 40400.49 * 1000])
    prefill = sorted([1331 / 3565.84 * 1000, 4914 / 13931.70 * 1000])
    assert ld["observed"]["decode_tps"] == {"median": round(sum(decode) / 2, 2), "min": round(decode[0], 2),
                                            "max": round(decode[1], 2), "n": 2}
    assert ld["observed"]["prefill_tps"]["median"] == round(sum(prefill) / 2, 2)
