"""One measured request: send it, store it, and notice a load inside it."""

from __future__ import annotations

from dataclasses import dataclass

from .backends import BackendError
from .prompts import new_nonce
from .store import Store, dumps, utcnow

_FIELDS = (
    "prompt_tokens", "generated_tokens", "prompt_ms", "predicted_ms", "prefill_tps",
    "decode_tps", "ttft_ms", "wall_ms", "stop_reason", "answer_chars", "reasoning_chars",
    "draft_tokens", "draft_accepted", "cached_tokens", "counter_source",
)


@dataclass
class Taken:
    ok: bool
    sample_id: int
    text: str
    load_id: int | None = None


def take_sample(
    store: Store,
    backend,
    *,
    run_id: int,
    cell_id: int,
    model_id: int,
    model: str,
    repetition: int,
    build_prompt,
    max_tokens: int,
    reasoning: bool,
    kind: str = "measure",
    extra: dict | None = None,
    client=None,
    nonce: str | None = None,
    load_id: int | None = None,
) -> Taken:
    """Send one request and store it as a sample (or as an exception sample).

    ``build_prompt(nonce)`` makes the prompt, so every sample carries its own
    nonce unless a canary deliberately repeats one.
    """
    nonce = nonce or new_nonce()
    prompt = build_prompt(nonce)
    row = {
        "run_id": run_id, "cell_id": cell_id, "repetition": repetition, "nonce": nonce,
        "started_at": utcnow(), "kind": kind, "load_id": load_id,
    }
    watcher = None
    try:
        if backend.is_router():
            watcher = backend.watch_load(model)
    except BackendError:
        watcher = None
    try:
        res = backend.chat(model, prompt, max_tokens=max_tokens, reasoning=reasoning, extra=extra, client=client)
    except BackendError as exc:
        row.update({"error_kind": exc.kind, "error_text": exc.text, "counter_source": "none"})
        if watcher is not None:
            watcher.stop(settle_s=0.0)
            watcher = None
        sample_id = store.insert("samples", row)
        return Taken(False, sample_id, f"exception ({exc.kind}): {exc.text[:160]}")
    row.update({k: getattr(res, k) for k in _FIELDS})
    row["request_json"] = dumps(res.request)
    row["response_json"] = dumps(res.response)
    sample_id = store.insert("samples", row)
    text = (
        f"decode {res.decode_tps:.1f} tok/s, prefill {res.prefill_tps:.1f} tok/s, "
        f"prompt {res.prompt_tokens} tok, {res.generated_tokens} generated, stop={res.stop_reason}"
    )
    load_id = None
    if watcher is not None:
        watcher.stop(settle_s=2.0)
        if watcher.load_seconds is not None:
            # no token can arrive before the load is done: TTFT bounds the load
            bound = (res.ttft_ms or res.wall_ms or 0) / 1000.0
            seconds = min(watcher.load_seconds, bound) if bound else watcher.load_seconds
            load_id = store.insert(
                "loads",
                {
                    "run_id": run_id, "model_id": model_id, "trigger": "inside_request",
                    "sample_id": sample_id, "requested_at": watcher.requested_at,
                    "ready_at": watcher.ready_at, "load_seconds": seconds, "status": "loaded",
                    "port": watcher.port,
                },
            )
            store.update("samples", sample_id, {"load_id": load_id})
            text += f" [load inside request: {seconds:.2f} s]"
    return Taken(True, sample_id, text, load_id)
