"""Canaries: one deliberate provocation per gate, to prove each gate can fire.

Each canary is a real request against the real server, stored as a sample
of kind ``canary`` in a cell of its own, so it never reaches a median. A gate
that cannot be provoked against this server is judged on a recorded
response taken from a published log, and marked ``recorded``.
"""

from __future__ import annotations

import time
from typing import Callable

import httpx

from . import cellchecks
from .backends import BackendError
from .llamacpp import free_port
from .prompts import build_prompt
from .sampling import take_sample
from .store import Store, dumps, utcnow

# Published llama-server output with one layer left on the CPU:
# ggml-org/llama.cpp issue #24183 ("Off-by-one-errror causes one layer to not go on the GPU").
RECORDED_PARTIAL_OFFLOAD = "0.03.232.050 I load_tensors: offloaded 65/66 layers to GPU"
RECORDED_PARTIAL_OFFLOAD_SOURCE = "https://github.com/ggml-org/llama.cpp/issues/24183"

FOREIGN_ADDRESS = "127.0.0.2"


def _new_cell(store: Store, run_id: int, model_id: int, gate: str, position: int, max_tokens: int) -> int:
    return store.insert(
        "cells",
        {"run_id": run_id, "model_id": model_id, "position": position, "prompt_class": "short",
         "reasoning": 0, "max_tokens": max_tokens, "repetitions": 1, "pinned": 0,
         "kind": "canary", "canary_gate": gate},
    )


def _plan(store: Store, run_id: int, gate: str, *, sample_id=None, result=None, reason=None, detail=None) -> None:
    store.insert(
        "canaries",
        {"run_id": run_id, "gate": gate, "sample_id": sample_id, "result": result, "reason": reason,
         "detail_json": dumps(detail) if detail is not None else None, "at": utcnow()},
    )


def run_canaries(store: Store, backend, campaign, run_id: int, model: str, model_id: int, *,
                 position: int, echo: Callable[[str], None], allow_evict: bool = True,
                 load_id: int | None = None) -> None:
    """Provoke every gate once on ``model``; eviction only where ``allow_evict`` (never a pin)."""
    short = campaign.prompt_tokens.get("short", 40)

    def sample(gate, *, max_tokens=8, extra=None, client=None, nonce=None, cell_id=None, rep=1):
        cid = cell_id or _new_cell(store, run_id, model_id, gate, position, max_tokens)
        taken = take_sample(
            store, backend, run_id=run_id, cell_id=cid, model_id=model_id, model=model, repetition=rep,
            build_prompt=lambda n: build_prompt(short, n), max_tokens=max_tokens, reasoning=False,
            kind="canary", extra=extra, client=client, nonce=nonce, load_id=load_id,
        )
        echo(f"canary {gate}: {taken.text}")
        return cid, taken

    eos = None
    try:
        eos_text = backend.server_info(model).get("eos_token")
        eos = backend.token_id(model, eos_text) if eos_text else None
    except BackendError:
        pass

    # length_limit: four tokens, and no end-of-generation token may stop it early
    _, t = sample("length_limit", max_tokens=4, extra={"ignore_eos": True})
    _plan(store, run_id, "length_limit", sample_id=t.sample_id, detail={"max_tokens": 4, "ignore_eos": True})

    # empty_answer: end-of-sequence forced as the first token
    if eos is not None:
        _, t = sample("empty_answer", extra={"logit_bias": [[eos, 100]]})
        _plan(store, run_id, "empty_answer", sample_id=t.sample_id, detail={"eos_token_id": eos})
    else:
        _plan(store, run_id, "empty_answer", result="not_run", reason="the server does not name its end-of-sequence token")

    # prompt_cache_hit: the same prompt twice with the cache allowed
    cid, _ = sample("prompt_cache_hit", extra={"cache_prompt": True}, nonce="cafe0000cafe0000")
    _, t = sample("prompt_cache_hit", extra={"cache_prompt": True}, nonce="cafe0000cafe0000", cell_id=cid, rep=2)
    _plan(store, run_id, "prompt_cache_hit", sample_id=t.sample_id, detail={"repeated_nonce": "cafe0000cafe0000"})

    # counter_sanity: one token leaves no decode interval to divide by
    _, t = sample("counter_sanity", max_tokens=1)
    _plan(store, run_id, "counter_sanity", sample_id=t.sample_id, detail={"max_tokens": 1})

    # foreign_load: a second client from another loopback address, inside the cell
    cid = _new_cell(store, run_id, model_id, "foreign_load", position, 8)
    cellchecks.snapshot(store, backend, cid, model, "before", embedding_url=None, embedding_model=None)
    _, t = sample("foreign_load", cell_id=cid)
    foreign_error = None
    try:
        with httpx.Client(base_url=backend.url, transport=httpx.HTTPTransport(local_address=FOREIGN_ADDRESS),
                          timeout=60) as other:
            backend.chat(model, build_prompt(short, "f0re1gn0f0re1gn0"), max_tokens=16, reasoning=False,
                         client=other)
    except (BackendError, httpx.HTTPError, OSError) as exc:
        foreign_error = str(exc)
    cellchecks.snapshot(store, backend, cid, model, "after", embedding_url=None, embedding_model=None)
    if foreign_error:
        _plan(store, run_id, "foreign_load", sample_id=t.sample_id, result="not_run",
              reason=f"second client from {FOREIGN_ADDRESS} failed: {foreign_error}")
    else:
        _plan(store, run_id, "foreign_load", sample_id=t.sample_id, detail={"foreign_client": FOREIGN_ADDRESS})

    # embedding_down: the probe aimed at a closed loopback port
    closed = f"http://127.0.0.1:{free_port()}"
    cid = _new_cell(store, run_id, model_id, "embedding_down", position, 8)
    cellchecks.snapshot(store, backend, cid, model, "before", embedding_url=closed, embedding_model=None)
    _, t = sample("embedding_down", cell_id=cid)
    cellchecks.snapshot(store, backend, cid, model, "after", embedding_url=closed, embedding_model=None)
    _plan(store, run_id, "embedding_down", sample_id=t.sample_id, detail={"embedding_url": closed})

    # load_time: evict the model, so the next request has to load it
    if not allow_evict:
        _plan(store, run_id, "load_time", result="not_run",
              reason=f"{model} is the pinned model and is never unloaded by cardproof")
    elif backend.is_router():
        try:
            backend.unload(model)
            for _ in range(200):
                if backend.model_status(model) != "loaded":
                    break
                time.sleep(0.05)
            _, t = sample("load_time")
            _plan(store, run_id, "load_time", sample_id=t.sample_id, detail={"evicted": model})
        except (BackendError, httpx.HTTPError) as exc:
            _plan(store, run_id, "load_time", result="not_run", reason=f"eviction failed: {exc}")
    else:
        _plan(store, run_id, "load_time", result="not_run", reason="single-model server: nothing can be evicted")

    # not_on_card: offload cannot be changed per request -> a recorded line
    _plan(store, run_id, "not_on_card", result=None,
          reason=f"offload cannot be changed per request; recorded line from {RECORDED_PARTIAL_OFFLOAD_SOURCE}",
          detail={"recorded_line": RECORDED_PARTIAL_OFFLOAD})
