"""llama.cpp's llama-server, single-model or router mode, over httpx.

Throughput comes from the response's ``timings`` counters only (principle 1);
the wall clock is kept beside them, never substituted for them.
"""

from __future__ import annotations

import json
import time

import httpx

from ..store import utcnow
from .base import BackendError, LoadResult, PollingLoadWatcher, SampleResult
from .http import check_stream_status, parse_prometheus, request_json, sse_chunks
from .shapes import chunk_pieces, timings_counters
from .validate import model_list, show


def _model_status(entry: dict) -> str | None:
    """The router's state word for one model entry; None when it states none as text."""
    status = entry.get("status")
    if isinstance(status, dict):
        status = status.get("value")
    return status if isinstance(status, str) else None


class LlamaServerBackend:
    kind = "llama-server"

    def __init__(self, url: str, *, timeout_s: float = 300.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.client = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout_s, connect=5.0))
        self._router: bool | None = None
        self._side: httpx.Client | None = None

    def close(self) -> None:
        self.client.close()
        if self._side is not None:
            self._side.close()

    def side_client(self) -> httpx.Client:
        """A second client for polling beside a running request (thread-safe, made once)."""
        if self._side is None:
            self._side = httpx.Client(base_url=self.url, timeout=5.0)
        return self._side

    # -- plain GETs ------------------------------------------------------
    def _get_json(self, path: str, **params) -> dict:
        return request_json(self.client, "GET", path, params=params or None)

    def models(self) -> list[dict]:
        """The server's model list (router: with per-model status); entries naming no model are left out."""
        return model_list(self._get_json("/models"), f"GET {self.url}/models")

    def is_router(self) -> bool:
        if self._router is None:
            try:
                listed = self.models()
            except BackendError as exc:
                if exc.kind != "protocol":
                    raise
                return False  # an unreadable listing names no models to route; asked again next time
            self._router = any("status" in m for m in listed)
        return self._router

    def model_status(self, name: str) -> str | None:
        """``loaded``/``loading``/``unloaded``/... in router mode; None if unknown."""
        for m in self.models():
            if m["id"] == name or name in (m.get("aliases") or []):
                return _model_status(m)
        return None

    def model_entry(self, name: str) -> dict | None:
        for m in self.models():
            if m["id"] == name:
                return m
        return None

    def metrics(self, model: str | None = None) -> dict:
        """Prometheus counters of the server (router: of ``model``'s child).

        Raises BackendError(kind="http", status=501) when the server was
        started without ``--metrics``.
        """
        params = {"model": model} if (model and self.is_router()) else None
        try:
            r = self.client.get("/metrics", params=params, timeout=15.0)
        except httpx.TransportError as exc:
            raise BackendError("connection", f"GET {self.url}/metrics: {exc}") from exc
        if r.status_code >= 400:
            raise BackendError("http", f"GET /metrics: HTTP {r.status_code}: {r.text[:200]}", status=r.status_code)
        return parse_prometheus(r.text)

    def token_id(self, model: str, text: str) -> int | None:
        """The id of a special token such as the end-of-sequence marker."""
        body = {"content": text, "parse_special": True}
        if self.is_router():
            body["model"] = model
        try:
            r = self.client.post("/tokenize", json=body, timeout=15.0)
            data = r.json()
        except (httpx.HTTPError, ValueError, RecursionError):
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            return None
        return tokens[0] if len(tokens) == 1 and isinstance(tokens[0], int) else None

    def unload(self, name: str) -> None:
        """Ask the router to unload ``name`` (used only for canaries, never on a pin)."""
        self.client.post("/models/unload", json={"model": name}, timeout=30.0)

    def server_info(self, model: str | None = None) -> dict:
        """/props of the server (router: of the loaded child for ``model``)."""
        params = {"model": model} if (model and self.is_router()) else {}
        props = self._get_json("/props", **params)
        if not isinstance(props, dict):
            # the run goes on without the server's self-description; the reason is kept with it
            return {"props_error": f"GET {self.url}/props is not an object: {show(props)}"}
        return props

    # -- loads -----------------------------------------------------------
    def load(self, name: str, *, poll_s: float = 0.05, limit_s: float | None = None) -> LoadResult:
        """Load ``name`` (router mode) and wait until the router reports it loaded."""
        requested = utcnow()
        if not self.is_router():
            return LoadResult(name, requested, requested, None, "already_loaded")
        if self.model_status(name) == "loaded":
            # loaded before we asked: no load to time, and we do not guess one
            return LoadResult(name, requested, None, None, "already_loaded")
        t0 = time.perf_counter()
        try:
            r = self.client.post("/models/load", json={"model": name}, timeout=30.0)
        except httpx.TransportError as exc:
            raise BackendError("connection", f"POST {self.url}/models/load: {exc}") from exc
        if r.status_code >= 400:
            return LoadResult(name, requested, None, None, "failed", f"HTTP {r.status_code}: {r.text[:300]}")
        deadline = t0 + (limit_s or self.timeout_s)
        while time.perf_counter() < deadline:
            entry = self.model_entry(name)
            status = _model_status(entry) if entry else None
            if status == "loaded":
                secs = time.perf_counter() - t0
                return LoadResult(name, requested, utcnow(), secs, "loaded", port=_port_of(entry))
            detail = entry.get("status") if entry else None
            if status in ("failed", "error") or (isinstance(detail, dict) and detail.get("failed")):
                return LoadResult(name, requested, None, None, "failed", json.dumps(detail)[:500])
            time.sleep(poll_s)
        return LoadResult(name, requested, None, None, "failed", f"not loaded after {limit_s or self.timeout_s:.0f} s")

    def watch_load(self, name: str) -> "LoadWatcher":
        """Poll the router during a request that will load ``name`` itself."""
        return LoadWatcher(self, name)

    # -- one measured request -------------------------------------------
    def chat(
        self,
        model: str,
        prompt: str,
        *,
        max_tokens: int,
        reasoning: bool,
        extra: dict | None = None,
        client: httpx.Client | None = None,
    ) -> SampleResult:
        """One streamed chat request; ``client`` lets a canary speak from another address."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "stream": True,
            "cache_prompt": False,
            "chat_template_kwargs": {"enable_thinking": reasoning},
            "stream_options": {"include_usage": True},
        }
        if extra:
            body.update(extra)
        answer_parts: list[str] = []
        reasoning_parts: list[str] = []
        final: dict = {}
        finish_reason = None
        ttft_ms = None
        t0 = time.perf_counter()
        try:
            # A fresh connection per measured request: the router sometimes
            # drops a kept-alive connection between requests, which would turn
            # into a false "server disconnected" exception.
            with (client or self.client).stream(
                "POST", "/v1/chat/completions", json=body, headers={"Connection": "close"}
            ) as r:
                check_stream_status(r)
                for chunk in sse_chunks(r):
                    for piece in chunk_pieces(chunk):
                        if (piece.content or piece.reasoning) and ttft_ms is None:
                            ttft_ms = (time.perf_counter() - t0) * 1000.0
                        answer_parts.append(piece.content)
                        reasoning_parts.append(piece.reasoning)
                        finish_reason = piece.finish_reason or finish_reason
                    if "timings" in chunk:
                        final["timings"] = chunk["timings"]
                    if chunk.get("usage"):
                        final["usage"] = chunk["usage"]
        except httpx.TimeoutException as exc:
            raise BackendError("timeout", f"no answer within {self.timeout_s:.0f} s: {exc}") from exc
        except httpx.TransportError as exc:
            raise BackendError("connection", f"{type(exc).__name__}: {exc}") from exc
        except httpx.HTTPError as exc:  # e.g. a body that does not decode as its Content-Encoding says
            raise BackendError("protocol", f"{type(exc).__name__}: {exc}") from exc
        wall_ms = (time.perf_counter() - t0) * 1000.0
        if final.get("timings") is None:
            raise BackendError("protocol", "stream ended without a timings object (no counters)")
        counters = timings_counters(final)
        answer = "".join(answer_parts)
        reasoning_text = "".join(reasoning_parts)
        final["finish_reason"] = finish_reason
        # the whole answer is evidence (bounded by max_tokens): gates read it later
        final["answer"] = answer
        final["reasoning"] = reasoning_text
        return SampleResult(
            **counters,
            ttft_ms=ttft_ms,
            wall_ms=wall_ms,
            stop_reason=finish_reason,
            answer_chars=len(answer),
            reasoning_chars=len(reasoning_text),
            counter_source="timings",
            request={k: v for k, v in body.items() if k != "messages"} | {"prompt_chars": len(prompt)},
            response=final,
        )

    def chat_raw(self, model: str, body: dict, *, timeout_s: float | None = None) -> dict:
        """One non-streamed /v1/chat/completions with a caller-built body; the server's JSON as it came.

        For probes: tool definitions, tool results, images. Not a
        measurement (no counters are read); errors keep the server's text.
        """
        full = body | {"model": model, "stream": False}
        try:
            r = self.client.post("/v1/chat/completions", json=full, headers={"Connection": "close"},
                                 timeout=timeout_s or self.timeout_s)
        except httpx.TimeoutException as exc:
            raise BackendError("timeout", f"no answer within {timeout_s or self.timeout_s:.0f} s: {exc}") from exc
        except httpx.TransportError as exc:
            raise BackendError("connection", f"{type(exc).__name__}: {exc}") from exc
        if r.status_code >= 400:
            raise BackendError("http", f"HTTP {r.status_code}: {r.text[:500]}", status=r.status_code)
        try:
            data = r.json()
        except ValueError as exc:
            raise BackendError("protocol", f"not JSON: {r.text[:200]!r}") from exc
        if not isinstance(data, dict) or "error" in data:
            raise BackendError("http", f"error in answer: {str(data)[:500]}")
        return data


def _port_of(entry: dict | None) -> int | None:
    if not entry:
        return None
    status = entry.get("status")
    port = entry.get("port") or (status.get("port") if isinstance(status, dict) else None)
    if isinstance(port, str) and port.isdigit() and len(port) <= 5:
        port = int(port)
    # anything but a real port number is no port (a huge one would not even fit the column)
    return port if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536 else None


class LoadWatcher(PollingLoadWatcher):
    """The router's per-model status (``GET /models``), polled around a request."""

    def __init__(self, backend: LlamaServerBackend, name: str, poll_s: float = 0.02):
        self._client = backend.side_client()
        super().__init__(name, poll_s)

    def _poll(self) -> tuple[str | None, int | None]:
        try:
            data = model_list(self._client.get("/models").json(), "/models")
        except Exception:  # any unreadable answer: state unknown, as when the server is busy
            return None, None
        for m in data:
            if m["id"] == self.name:
                status = _model_status(m)
                return ("ready" if status == "loaded" else "loading"), _port_of(m)
        return None, None
