"""Every line a server process prints belongs to its load: the lines before ``build:`` and after its exit too.

The process is a real one: llama.cpp b7342 in docker on one A100
(tests/fixtures/logs/real/yuy4o-llm-b7342-docker-a100.log, read by hand in
its README): device discovery, backend loading, a ``warn:`` and ``main:
setting n_parallel ...`` before ``build:``, ``Received second interrupt``
after ``cleaning up before exit``. Here it is restarted once and carried the
ways a log reaches cardproof: a plain file, ``docker logs -t``, ``docker
compose logs``, journald's text (a PID per process) and a router's child
(``[port]``). Which line belongs to which process is known by construction.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path, load_summaries
from cardproof.daemon.logs.context import context_from_slots
from cardproof.daemon.store import open_store

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
PROCESS = (REAL / "yuy4o-llm-b7342-docker-a100.log").read_text().splitlines()
MODEL = "Qwen3-Coder-30B-A3B-Instruct-Q8_0.gguf"


def _restarted(prefix):
    """The process twice, each line behind ``prefix(process, i)``; the owner (0 or 1) of each line."""
    lines, owners = [], []
    for proc in (0, 1):
        for i, text in enumerate(PROCESS):
            lines.append(prefix(proc, i) + text)
            owners.append(proc)
    return lines, owners


def _router():
    """A router spawning the same server as its child on port 45707, then the child's exit."""
    lines = ["0.00.529.359 I srv          load: spawning server instance with name=qwen on port 45707"]
    lines += [f"[45707] {t}" for t in PROCESS]
    lines += ["0.09.736.304 I srv           run: instance name=qwen exited with status 1"]
    return lines, [0] * len(lines)


SHAPES = {
    "plain": lambda: _restarted(lambda p, i: ""),
    "docker logs -t": lambda: _restarted(lambda p, i: f"2025-12-16T09:{10 + p}:00.{i:09d}Z "),
    "docker compose logs": lambda: _restarted(lambda p, i: "llama-server  | "),
    "journald": lambda: _restarted(lambda p, i: f"Dec 16 09:{10 + p}:00 gpu1 llama-server[{4242 + p}]: "),
    "router child": _router,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_line_of_a_process_is_in_its_load(shape, tmp_path):
    lines, owners = SHAPES[shape]()
    loads, got = _import_lines(tmp_path, lines)  # every line stored
    assert [ld["model"] for ld in loads] == (["qwen"] if shape == "router child" else [MODEL, MODEL])
    ids = [ld["id"] for ld in loads]
    wrong = [(n + 1, lines[n][:90]) for n, (load, owner) in enumerate(zip(got, owners)) if load != ids[owner]]
    assert wrong == []  # every line, the device discovery before build: and the last words after exit included
    if shape != "router child":
        assert [(ld["end_reason"], ld["facts"]["ctx_size"]) for ld in loads] == [("process exit", 65536)] * 2


@pytest.mark.parametrize("facts, ctx", [
    # 4 slots of one unified cache (poseidon's log, b7342's): each slot's n_ctx is the whole context
    ([("kv_unified", None, "true", 5), ("slots", 4, None, 20)] + [("slot_ctx_size", 8192, None, 21 + i)
                                                                  for i in range(4)], (8192.0, 24)),
    # a cache per slot: 4 parts of 2048
    ([("kv_unified", None, "false", 5), ("slots", 4, None, 20)] + [("slot_ctx_size", 2048, None, 21 + i)
                                                                   for i in range(4)], (8192.0, 24)),
    # one slot: unified or not, its context is the whole
    ([("slots", 1, None, 20), ("slot_ctx_size", 4096, None, 21)], (4096.0, 21)),
    # 2026: one line for all slots ("initializing, n_slots = 4, n_ctx_slot = 65536, kv_unified = 'true'")
    ([("slots", 4, None, 20), ("slot_ctx_size", 65536, None, 20), ("kv_unified", None, "true", 20)], (65536.0, 20)),
    # the log says whose cache it is nowhere: no context rather than a guess
    ([("slots", 4, None, 20)] + [("slot_ctx_size", 8192, None, 21 + i) for i in range(4)], None),
    # slots capped to the training context (gemma 4's log: 264960 asked, 262144 each): the whole is unknown
    ([("seq_ctx_size", 264960, None, 9), ("slots", 10, None, 20)] + [("slot_ctx_size", 262144, None, 21 + i)
                                                                     for i in range(10)], None),
    # only 2 of 4 slots read so far (a capture that stopped between them): not every slot has said it
    ([("kv_unified", None, "true", 5), ("slots", 4, None, 20), ("slot_ctx_size", 8192, None, 21),
      ("slot_ctx_size", 8192, None, 22)], None),
    # the log states it itself
    ([("ctx_size", 16384, None, 3), ("slots", 1, None, 20), ("slot_ctx_size", 16384, None, 21)], None),
])
def test_a_loads_context_is_stated_from_its_slots_only_where_they_prove_it(facts, ctx):
    assert context_from_slots(facts) == ctx


# -- the next process's first words where the previous one said no last word ---------------------------

VULKAN = (REAL / "ik-llama-issue503-zsh-segfault.log").read_text().splitlines()[1:]  # its lines 2-124
VULKAN_MODEL = "Qwen3-32B-UD-Q4_K_XL.gguf"


def _import_lines(tmp_path, lines):
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    store = open_store(tmp_path / "t.db")
    try:
        stats = import_path(store, path)
        loads = load_summaries(store.db)
        got = [r[0] for r in store.db.execute("select load_id from log_lines order by id")]
    finally:
        store.close()
    assert stats["lines"] == len(lines)
    return loads, got


def _wrong(lines, got, owners, loads):
    ids = [ld["id"] for ld in loads]
    return [(n + 1, lines[n][:90]) for n, (load, owner) in enumerate(zip(got, owners))
            if load != (None if owner is None else ids[owner])]


@pytest.mark.parametrize("prefix", ["", "llama-server  | "], ids=["plain", "docker compose logs"])
def test_a_process_killed_without_a_word_ends_where_the_next_ones_device_discovery_begins(prefix, tmp_path):
    """b7342 loaded and idle, then killed (kill -9, the OOM killer: no exit line) and started again.

    Its CUDA discovery after ``model loaded`` can only be the next process's: a loaded server never
    looks for devices again. The lines were glued onto the killed load (8 of them, build: started the
    next), which was said to end there only because the next one started.
    """
    first = PROCESS[:-2]  # the same process without "cleaning up before exit" and the second interrupt
    lines = [prefix + t for t in first + PROCESS]
    owners = [0] * len(first) + [1] * len(PROCESS)
    loads, got = _import_lines(tmp_path, lines)
    assert [ld["model"] for ld in loads] == [MODEL, MODEL]
    assert _wrong(lines, got, owners, loads) == []
    assert [ld["end_reason"] for ld in loads] == ["next process started", "process exit"]


def test_a_vulkan_process_restarted_after_its_crash_begins_at_its_device_list(tmp_path):
    """ik_llama.cpp's Vulkan build (ik_llama.cpp issue 503) segfaults, is started again into the same terminal log.

    ``ggml_vulkan: Found 1 Vulkan devices:`` has llama.cpp's line shape and was taken as the crashed
    process's own (as were ``Vulkan0: ...`` and ``Log start`` after it): the second process began at
    ``main: build`` instead of at its first line.
    """
    lines = VULKAN + VULKAN
    owners = [0] * len(VULKAN) + [1] * len(VULKAN)
    loads, got = _import_lines(tmp_path, lines)
    assert [ld["model"] for ld in loads] == [VULKAN_MODEL, VULKAN_MODEL]
    assert _wrong(lines, got, owners, loads) == []
    assert loads[0]["end_reason"] == "crashed: SIGSEGV"


# Real lines other builds print before their logger starts, each quoted from its source:
# * SYCL (2026), as the backend registers -- ggml-org/llama.cpp issue #21747, comment by Stoney49th
#   (an rpc-server of the same build, whose ggml-sycl prints the same table before anything else);
# * a debug build's backend registry (build 5505) -- github.com/bjodah/bug-reproducer-llamacpp-json-parse,
#   README.md (the console under gdb, lines 'ggml_cuda_init ...' to 'load_backend ...').
SYCL_TABLE = """\
Build with Macros:
  GGML_SYCL_FORCE_MMQ: no
  GGML_SYCL_F16: yes
  GGML_SYCL_GRAPH: yes
  GGML_SYCL_DNNL: yes
Running with Environment Variables:
  GGML_SYCL_DEBUG: 0
  GGML_SYCL_DISABLE_OPT: 0
  GGML_SYCL_DISABLE_GRAPH: 1
  GGML_SYCL_DISABLE_DNN: 0
  GGML_SYCL_PRIORITIZE_DMMV: 0
  GGML_SYCL_USE_ASYNC_MEM_OP: 1
  GGML_SYCL_ENABLE_FLASH_ATTN: 1
Found 1 SYCL devices:
|  |                   |                                       |       |Max    |        |Max  |Global |                     |
|  |                   |                                       |       |compute|Max work|sub  |mem    |                     |
|ID|        Device Type|                                   Name|Version|units  |group   |group|size   |       Driver version|
|--|-------------------|---------------------------------------|-------|-------|--------|-----|-------|---------------------|
| 0| [level_zero:gpu:0]|             Intel Arc Pro B50 Graphics|   20.1|    128|    1024|   32| 17095M|         1.15.37833+4|
SYCL Optimization Feature:
|ID|        Device Type|Reorder|
|--|-------------------|-------|
| 0| [level_zero:gpu:0]|      Y|""".splitlines()
DEBUG_REGISTRY = """\
ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    yes
ggml_cuda_init: GGML_CUDA_FORCE_CUBLAS: no
ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes
register_backend: registered backend CUDA (1 devices)
register_device: registered device CUDA0 (NVIDIA GeForce RTX 3090)
register_backend: registered backend RPC (0 devices)
register_backend: registered backend CPU (1 devices)
register_device: registered device CPU (AMD Ryzen 9 7950X 16-Core Processor)
load_backend: failed to find ggml_backend_init in /build/llama.cpp-debug/bin/libggml-cuda.so
load_backend: failed to find ggml_backend_init in /build/llama.cpp-debug/bin/libggml-rpc.so
load_backend: failed to find ggml_backend_init in /build/llama.cpp-debug/bin/libggml-cpu.so""".splitlines()
BUILD_AT = next(i for i, t in enumerate(PROCESS) if t.startswith("build: "))


@pytest.mark.parametrize("preamble", [SYCL_TABLE, DEBUG_REGISTRY], ids=["sycl table", "debug registry"])
@pytest.mark.parametrize("restarted", [False, True], ids=["first", "after an exit"])
def test_other_backends_words_before_build_are_their_process(preamble, restarted, tmp_path):
    """A wrapper's banner stays out; the backend's own words, in whatever shape, are the process's."""
    banner = ["=== Starting llama.cpp server ===", ""]
    process = preamble + PROCESS[BUILD_AT:]
    lines, owners = banner[:], [None, None]
    if restarted:
        lines += process
        owners += [0] * len(process)
    lines += process
    owners += [len(set(o for o in owners if o is not None))] * len(process)
    loads, got = _import_lines(tmp_path, lines)
    assert [ld["model"] for ld in loads] == [MODEL] * (2 if restarted else 1)
    assert _wrong(lines, got, owners, loads) == []
