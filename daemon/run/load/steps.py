"""What every load and depth step shares: the server's shape, the step's rows, storing one request."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from cardproof.daemon.backends import Backend, BackendError
from cardproof.daemon.backends.http import tls_verify
from cardproof.daemon.store.said import Saying, english, said_json
from cardproof.daemon.run.sampling import Sent, Taken, store_sent
from cardproof.daemon.store import Store, dumps, json_text, utcnow


@dataclass(frozen=True)
class ServerShape:
    """How many requests the server serves at once and how much context each gets, as it says itself."""

    total_slots: int | None
    n_ctx: int | None  # per slot: the longest prompt plus answer one request can have
    note: str | None = None  # why a figure is missing


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 40 else None


def server_shape(backend: Backend, model: str) -> ServerShape:
    """Slots and per-slot context from ``/props`` (``total_slots``, ``default_generation_settings.n_ctx``).

    A server that does not say (Ollama, a generic endpoint) or cannot be
    reached gives None with the reason: no step is labelled from a guess.
    """
    try:
        props = backend.server_info(model)
    except BackendError as exc:
        return ServerShape(None, None, f"server did not describe itself: {exc.text[:200]}")
    if not isinstance(props, dict):
        return ServerShape(None, None, "server description is not an object")
    settings = props.get("default_generation_settings")
    n_ctx = _count(settings.get("n_ctx")) if isinstance(settings, dict) else None
    slots = _count(props.get("total_slots"))
    note = None if slots and n_ctx else "the server's description names no total_slots or n_ctx"
    return ServerShape(slots, n_ctx, note)


def new_step(store: Store, run_id: int, model_id: int, axis: str, *, pinned: bool, prompt_class: str,
             max_tokens: int, requests: int, shape: ServerShape, streams: int | None = 1,
             depth_tokens: int | None = None, refused_reason: Saying | None = None,
             rate: dict | None = None) -> dict:
    """The step's cell (kind ``load``/``depth``/``rate``: never in a median of the main table) and its row.

    ``refused_reason`` is stored as English (``refused_reason``) and structured (``refused_json``).
    ``rate``: a rate step's ``rate_rps``, ``seed`` and ``duration_s``; its
    ``streams`` is None and whether it queued is known only once it ran.
    """
    position = store.db.execute("select count(*) from load_steps where run_id = ?", [run_id]).fetchone()[0]
    cell_position = store.db.execute("select coalesce(max(position), -1) + 1 from cells where run_id = ?",
                                     [run_id]).fetchone()[0]
    cell_id = store.insert("cells", {
        "run_id": run_id, "model_id": model_id, "position": cell_position, "prompt_class": prompt_class,
        "reasoning": 0, "max_tokens": max_tokens, "repetitions": requests, "pinned": int(pinned), "kind": axis,
    })
    row = {
        "run_id": run_id, "model_id": model_id, "cell_id": cell_id, "axis": axis, "position": position,
        "streams": streams, "depth_tokens": depth_tokens, "requests": requests, "prompt_class": prompt_class,
        "max_tokens": max_tokens, "total_slots": shape.total_slots, "n_ctx": shape.n_ctx,
        "queueing": None if shape.total_slots is None or streams is None else int(streams > shape.total_slots),
        "started_at": utcnow(), "refused_reason": english(refused_reason),
        "refused_json": json_text(said_json(refused_reason)) if said_json(refused_reason) else None,
        **(rate or {}),
    }
    row["id"] = store.insert("load_steps", row)
    return row


def store_request(store: Store, step_id: int, stream: int | None, sent: Sent, arrival: dict | None = None) -> Taken:
    """One request of a step: its sample row, and beside it the stream, queue time and chunk intervals.

    ``arrival``: a rate step's ``scheduled_s``, ``sent_s`` and ``in_flight`` of the request.
    """
    taken = store_sent(store, sent)
    res = sent.result
    extra = {"sample_id": taken.sample_id, "step_id": step_id, "stream": stream, "chunks": 0, **(arrival or {})}
    if res is not None:
        chunks = res.chunk_ms
        extra["chunks"] = len(chunks)
        extra["itl_ms_json"] = dumps([round(b - a, 3) for a, b in zip(chunks, chunks[1:])])
        if res.ttft_ms is not None and res.prompt_ms is not None:
            # waiting for a slot shows as time to first token the server's prefill does not account for
            extra["queue_ms"] = res.ttft_ms - res.prompt_ms
    store.insert("load_samples", extra)
    return taken


def step_client(backend: Backend, streams: int) -> httpx.Client:
    """A client with room for every stream of the step at once (httpx's pool would queue beyond 100)."""
    return httpx.Client(base_url=backend.url, timeout=backend.client.timeout, headers=backend.login_headers(),
                        verify=tls_verify(backend.url),
                        limits=httpx.Limits(max_connections=streams + 2, max_keepalive_connections=0))  # see make_client
