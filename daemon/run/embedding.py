"""The co-resident embedding endpoint, probed around each cell.

A real request (``POST /v1/embeddings``); the probe succeeds only when a
non-empty vector comes back.
"""

from __future__ import annotations

import time

import httpx

from cardproof.daemon.store.redact import public_url
from cardproof.daemon.store import utcnow


def probe(url: str, model: str | None = None, *, timeout_s: float = 10.0) -> dict:
    """``{"ok", "status", "error", "latency_ms", "dims", "at"}`` for one probe."""
    body = {"input": "cardproof embedding probe"}
    if model:
        body["model"] = model
    t0 = time.perf_counter()
    out = {"at": utcnow(), "url": public_url(url)}  # stored for display: no login
    try:
        r = httpx.post(url.rstrip("/") + "/v1/embeddings", json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        out.update(ok=False, status=None, error=f"{type(exc).__name__}: {exc}")
        return out
    out["latency_ms"] = (time.perf_counter() - t0) * 1000.0
    out["status"] = r.status_code
    try:
        vec = r.json()["data"][0]["embedding"]
    except (ValueError, KeyError, IndexError, TypeError):
        out.update(ok=False, error=f"HTTP {r.status_code}: no embedding in answer: {r.text[:200]}")
        return out
    out.update(ok=bool(vec), dims=len(vec), error=None if vec else "empty embedding")
    return out
