"""llama.cpp's llama-server, single-model or router mode, over httpx.

It speaks the OpenAI-compatible API (the streamed request is read by
:func:`openai.read_stream`), and adds the router's loads, ``/props``,
``/metrics`` and ``/tokenize``. Throughput comes from the response's
``timings`` counters only (principle 1); the wall clock is kept beside
them, never substituted for them.
"""

from __future__ import annotations

import json
import time

import httpx

from ..store import utcnow
from .base import BackendError, LoadResult, PollingLoadWatcher, SampleResult
from .http import parse_prometheus, request_json
from .openai import OpenAICompatBackend, read_stream, request_record
from .shapes import timings_counters
from .validate import model_list, show


_TRY_AGAIN = "try again later"


def _model_status(entry: dict) -> str | None:
    """The router's state word for one model entry; None when it states none as text."""
    status = entry.get("status")
    if isinstance(status, dict):
        status = status.get("value")
    return status if isinstance(status, str) else None


class LlamaServerBackend(OpenAICompatBackend):
    kind = "llama-server"
    order = 10
    options = ()
    sends_cache_prompt = True  # every measured prompt is evaluated in full

    def __init__(self, url: str, *, timeout_s: float = 300.0):
        super().__init__(url, timeout_s=timeout_s)
        self._router: bool | None = None

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

    def describe_model(self, name: str) -> dict | None:
        """A single server's one model, from the file its ``/props`` names (``model_path``) where that file is
        on this machine: size, digest and the GGUF shape the findings group by. A router lists each model's
        file itself (runner: ``model_path_from_args``); a file not here describes nothing."""
        from pathlib import Path

        from cardproof.daemon.server.modelfile import describe

        if self.is_router():
            return None
        try:
            path = self._get_json("/props").get("model_path")
        except (BackendError, AttributeError):
            return None
        if not isinstance(path, str) or not path or len(path) > 4096:
            return None
        try:
            here = Path(path).is_file()
        except (OSError, ValueError):
            return None
        return {k: v for k, v in describe(name, path).items() if k != "name"} if here else None

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

    def process_exit(self, name: str) -> int | None:
        """The router's ``exit_code`` of ``name``'s child once it ended with a failing status (``failed``).

        The router reaps its children with sheredom's subprocess.h, which turns a death by any
        signal into status 1: this says that the process died, never which signal killed it.
        """
        if not self.is_router():
            return None
        status = (self.model_entry(name) or {}).get("status")
        if not isinstance(status, dict) or status.get("failed") is not True:
            return None
        code = status.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) and code != 0 else None

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

    def count_tokens(self, model: str, text: str) -> int | None:
        """The length of ``text`` in the model's tokenizer, from ``/tokenize`` (router: the model's child)."""
        body = {"content": text, "add_special": False, "parse_special": False}
        if self.is_router():
            body["model"] = model
        try:
            data = request_json(self.client, "POST", "/tokenize", json_body=body)
        except BackendError:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

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
        deadline = t0 + (limit_s or self.timeout_s)
        while True:
            try:
                r = self.client.post("/models/load", json={"model": name}, timeout=30.0)
            except httpx.TransportError as exc:
                raise BackendError("connection", f"POST {self.url}/models/load: {exc}") from exc
            # the router evicts the least recently used model first and re-checks its limit under a lock; a
            # child that has not yet left the count gets "model limit reached, try again later"
            # (server-models.cpp): asked again, as it says, until the load's own deadline
            if r.status_code >= 400 and _TRY_AGAIN in r.text and time.perf_counter() + 0.25 < deadline:
                time.sleep(0.25)
                continue
            break
        if r.status_code >= 400:
            return LoadResult(name, requested, None, None, "failed", f"HTTP {r.status_code}: {r.text[:300]}")
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
    def chat(self, model: str, prompt: str, *, max_tokens: int, reasoning: bool, extra: dict | None = None,
             client: httpx.Client | None = None) -> SampleResult:
        """One streamed chat request; ``client`` lets a canary speak from another address.

        Unlike a generic server's, the sample needs llama.cpp's ``timings``:
        a stream whose last ``timings`` is missing or null is an exception
        sample, never a wall-clock figure.
        """
        body = self.request_body(model, prompt, max_tokens, reasoning, extra)
        s = read_stream(client or self.client, "/v1/chat/completions", body, timeout_s=self.timeout_s)
        final: dict = {}
        if s.timings:
            final["timings"] = s.timings[-1]
        usage = next((u for u in reversed(s.usage) if u), None)  # an empty usage object counts nothing
        if usage:
            final["usage"] = usage
        if final.get("timings") is None:
            raise BackendError("protocol", "stream ended without a timings object (no counters)")
        counters = timings_counters(final)
        final["finish_reason"] = s.finish_reason
        # the whole answer is evidence (bounded by max_tokens): gates read it later
        final["answer"] = s.answer
        final["reasoning"] = s.reasoning
        return SampleResult(
            **counters,
            ttft_ms=s.ttft_ms,
            wall_ms=s.wall_ms,
            stop_reason=s.finish_reason,
            answer_chars=len(s.answer),
            reasoning_chars=len(s.reasoning),
            counter_source="timings",
            request=request_record(body, len(prompt)),
            response=final,
            chunk_ms=s.chunk_ms,
        )


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
        self._poller = backend.status_poller()
        super().__init__(name, poll_s)

    def _poll(self) -> tuple[str | None, int | None]:
        try:
            data = model_list(self._poller.get_json("/models"), "/models")
        except Exception:  # any unreadable answer: state unknown, as when the server is busy
            return None, None
        for m in data:
            if m["id"] == self.name:
                status = _model_status(m)
                return ("ready" if status == "loaded" else "loading"), _port_of(m)
        return None, None


BACKEND = LlamaServerBackend
