"""One measured request: send it, store it, and notice a load inside it.

In short, ``sampling.py``: one measured request (``take_sample(SampleRequest)``):
send, store (``insert_sample``: one prepared INSERT; a value that is no plain SQL value goes through
``Store.insert``), notice a load inside it
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Callable

import httpx

from cardproof.daemon.backends import Backend, BackendError
from cardproof.daemon.backends.base import SampleResult
from cardproof.daemon.backends.validate import check_sample
from cardproof.daemon.server.prompts import new_nonce
from cardproof.daemon.store import Store, StoreError, dumps, utcnow
from cardproof.daemon.store.file import shown

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
    result: SampleResult | None = None  # the answer as the backend read it (None: exception sample)


@dataclass
class SampleRequest:
    """One request to send and store: where its sample belongs and what it asks.

    ``build_prompt(nonce)`` makes the prompt, so every sample carries its own
    nonce unless a canary deliberately repeats one (``nonce``); ``client``
    lets a canary speak from another address.
    """

    run_id: int
    cell_id: int
    model_id: int
    model: str
    repetition: int
    build_prompt: Callable[[str], str]
    max_tokens: int
    reasoning: bool
    kind: str = "measure"
    extra: dict | None = None
    client: httpx.Client | None = None
    nonce: str | None = None
    load_id: int | None = None  # the load the sample was taken on, as far as the runner knows


@dataclass
class Sent:
    """One request sent and answered (``result``) or failed (``error``), not yet stored.

    Sending and storing are apart so that several streams can send at once
    while one thread writes (a SQLite connection belongs to one thread).
    """

    row: dict
    result: SampleResult | None = None
    error: tuple[str, str] | None = None  # (kind, text)
    request_json: str | None = None
    response_json: str | None = None


def send(backend: Backend, req: SampleRequest) -> Sent:
    """Send ``req`` and check the answer; never raises for a failed request (it is an exception sample)."""
    nonce = req.nonce or new_nonce()
    prompt = req.build_prompt(nonce)
    row = {
        "run_id": req.run_id, "cell_id": req.cell_id, "repetition": req.repetition, "nonce": nonce,
        "started_at": utcnow(), "kind": req.kind, "load_id": req.load_id,
    }
    try:
        res = backend.chat(req.model, prompt, max_tokens=req.max_tokens, reasoning=req.reasoning, extra=req.extra,
                           client=req.client)
        check_sample(res)
        # serialised here, in the sending thread: a JSON error is this sample's, and the writer only writes
        return Sent(row, res, request_json=dumps(res.request), response_json=dumps(res.response))
    except Exception as exc:  # noqa: BLE001 -- KeyboardInterrupt/SystemExit are not Exceptions and pass
        # a backend's own error keeps its kind; anything else it raised is a bug of ours or an
        # answer no check foresaw: one exception sample with the type and text, and the run goes on
        kind, text = (exc.kind, exc.text) if isinstance(exc, BackendError) else ("internal", _describe(exc))
        return Sent(row, error=(kind, text))


def store_sent(store: Store, sent: Sent) -> Taken:
    """Store what :func:`send` brought back as one sample row (an exception sample if it failed)."""
    row = dict(sent.row)
    if sent.result is None:
        kind, text = sent.error or ("internal", "no result")
        row.update({"error_kind": kind, "error_text": text, "counter_source": "none"})
        return Taken(False, insert_sample(store, row), f"exception ({kind}): {text[:160]}")
    res = sent.result
    row.update({k: getattr(res, k) for k in _FIELDS})
    row["request_json"] = sent.request_json
    row["response_json"] = sent.response_json
    sample_id = insert_sample(store, row)
    text = (
        f"decode {_rate(res.decode_tps)} tok/s, prefill {_rate(res.prefill_tps)} tok/s, "
        f"prompt {res.prompt_tokens} tok, {res.generated_tokens} generated, stop={res.stop_reason}"
    )
    return Taken(True, sample_id, text, result=res)


_PLAIN = (type(None), int, float, str, bytes)
_SQL: dict[tuple[str, ...], str] = {}


def insert_sample(store: Store, row: dict) -> int:
    """Insert one sample row and commit at once (a crash never loses a taken sample), as ``Store.insert`` does.

    One prepared INSERT instead of sqlite-utils' insert: that reads the
    table's columns and views and opens a savepoint on every call, about
    two thirds of a sample's storing time (the runner's cost per
    request). The row is the same; a value that is not a plain SQL value
    goes through ``Store.insert``, which turns it into JSON as before.
    """
    if not all(type(v) in _PLAIN for v in row.values()):
        return store.insert("samples", row)
    columns = tuple(row)
    sql = _SQL.get(columns)
    if sql is None:
        sql = _SQL[columns] = (f"insert into samples ({', '.join(f'[{c}]' for c in columns)}) "
                               f"values ({', '.join('?' * len(columns))})")
    conn = store.db.conn
    try:
        with conn:
            return conn.execute(sql, tuple(row.values())).lastrowid
    except sqlite3.Error as exc:
        raise StoreError(f"{shown(store.path)}: cannot write to table samples: {exc}") from exc


def take_sample(store: Store, backend: Backend, req: SampleRequest) -> Taken:
    """Send one request and store it as a sample (or as an exception sample)."""
    watcher = None
    try:
        if backend.is_router():
            watcher = backend.watch_load(req.model)
    except Exception:  # noqa: BLE001 -- no watcher is a missing load time, never a lost sample
        watcher = None
    sent = send(backend, req)
    if sent.result is None:
        if watcher is not None:
            watcher.stop(settle_s=0.0)
        return store_sent(store, sent)
    taken = store_sent(store, sent)
    res = sent.result
    if watcher is not None:
        watcher.stop(settle_s=2.0)
        if watcher.load_seconds is not None:
            # no token can arrive before the load is done: TTFT bounds the load
            bound = (res.ttft_ms or res.wall_ms or 0) / 1000.0
            seconds = min(watcher.load_seconds, bound) if bound else watcher.load_seconds
            load_id = store.insert(
                "loads",
                {
                    "run_id": req.run_id, "model_id": req.model_id, "trigger": "inside_request",
                    "sample_id": taken.sample_id, "requested_at": watcher.requested_at,
                    "ready_at": watcher.ready_at, "load_seconds": seconds, "status": "loaded",
                    "port": watcher.port,
                },
            )
            store.update("samples", taken.sample_id, {"load_id": load_id})
            taken.text += f" [load inside request: {seconds:.2f} s]"
            taken.load_id = load_id
    return taken


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _describe(exc: Exception) -> str:
    """``TypeName: text`` of an unexpected exception, bounded (the text may quote a whole answer)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 -- a str() that fails still leaves the type name
        text = "(no text)"
    return f"{type(exc).__name__}: {text}"[:1000]
