"""Context-depth steps: the prompt filled to a depth, one request at a time.

The depth is a target in tokens; the server's tokenizer decides the real
count, which every sample stores (``prompt_tokens``). A depth whose prompt
and answer cannot fit the server's per-slot context is refused before any
request, with both figures, and its samples are stored as refused.
"""

from __future__ import annotations

from typing import Callable

from cardproof.daemon.backends import Backend
from cardproof.daemon.server.prompts import build_prompt
from cardproof.daemon.store.said import Said
from cardproof.daemon.run.sampling import SampleRequest, send
from cardproof.daemon.store import Store, utcnow
from cardproof.daemon.campaign.tables.depth import DepthSettings
from cardproof.daemon.run.load.steps import ServerShape, new_step, store_request


def refusal(depth_tokens: int, max_tokens: int, shape: ServerShape) -> Said | None:
    """Why a depth cannot be measured on this server, or None."""
    if shape.n_ctx is None or depth_tokens + max_tokens <= shape.n_ctx:
        return None
    # a message id of the report's catalogue: said on each page in its language and number format
    return Said("depth {depth_tokens:,} tokens + {max_tokens:,} generated exceeds the server's context of "
                "{n_ctx:,} tokens per slot ({source})",
                {"depth_tokens": depth_tokens, "max_tokens": max_tokens, "n_ctx": shape.n_ctx,
                 "source": "/props default_generation_settings.n_ctx"})


def run_depth_step(store: Store, backend: Backend, *, run_id: int, model: str, model_id: int, pinned: bool,
                   load_id: int | None, depth_tokens: int, settings: DepthSettings, shape: ServerShape,
                   counted: Callable[[bool], None]) -> dict:
    """One depth: ``settings.repetitions`` requests in turn, or a refused step with its reason."""
    said = refusal(depth_tokens, settings.max_tokens, shape)
    why = said.english() if said else None
    step = new_step(store, run_id, model_id, "depth", pinned=pinned, prompt_class=f"depth-{depth_tokens}",
                    max_tokens=settings.max_tokens, requests=settings.repetitions, shape=shape,
                    depth_tokens=depth_tokens, refused_reason=said)
    if why:
        for rep in range(1, settings.repetitions + 1):
            store.insert("samples", {
                "run_id": run_id, "cell_id": step["cell_id"], "repetition": rep, "started_at": utcnow(),
                "kind": "depth", "load_id": load_id, "error_kind": "refused", "error_text": why,
                "counter_source": "none",
            })
            counted(False)
        store.update("load_steps", step["id"], {"ended_at": utcnow(), "wall_s": 0.0})
        return step
    wall_s = 0.0
    for rep in range(1, settings.repetitions + 1):
        req = SampleRequest(run_id, step["cell_id"], model_id, model, rep,
                            lambda nonce: build_prompt(depth_tokens, nonce), settings.max_tokens, False,
                            kind="depth", load_id=load_id)
        sent = send(backend, req)
        if sent.result is not None:
            wall_s += sent.result.wall_ms / 1000.0
        counted(store_request(store, step["id"], 1, sent).ok)
    store.update("load_steps", step["id"], {"ended_at": utcnow(), "wall_s": wall_s})
    step["wall_s"] = wall_s
    return step
