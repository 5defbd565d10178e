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
