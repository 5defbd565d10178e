"""llama-swap: a proxy that starts and stops one llama-server (or other upstream) per model.

Requests go through its OpenAI-compatible ``/v1/chat/completions``; the
upstream's ``timings`` pass through unchanged, so the counters are
llama-server's own (``counter_source = timings``). What llama-swap adds:

* ``GET /running`` -- ``{"running": [{"model", "state", ...}]}``; a
  process is listed from ``starting`` to ``stopping`` (states ``stopped``,
  ``starting``, ``ready``, ``stopping``, ``shutdown``);
* ``/upstream/{model}/...`` -- straight through to the model's own server
  (its ``/metrics``, ``/props``, ``/tokenize``); a request there starts the
  model if it is not running, so we only use it for a running model;
* ``GET /unload`` -- stops every model; newer versions also take
  ``POST /api/models/unload/{model}`` for one.

Endpoints and shapes follow github.com/mostlygeek/llama-swap
(proxy/proxymanager.go, proxy/process.go).
"""

from __future__ import annotations

import time

import httpx

from ..store import utcnow
from .base import BackendError, LoadResult, PollingLoadWatcher
from .http import not_supported, parse_prometheus, request_json
from .validate import as_object, model_list
from .openai import OpenAICompatBackend

_STATUS = {"ready": "loaded", "starting": "loading", "stopping": "unloading"}


class LlamaSwapBackend(OpenAICompatBackend):
    kind = "llama-swap"
    order = 30
    sends_cache_prompt = True  # llama-server upstream: no prompt cache reuse

    def __init__(self, url: str, *, timeout_s: float = 300.0, api_key: str | None = None):
        super().__init__(url, timeout_s=timeout_s, use_counters=True, api_key=api_key)

    def is_router(self) -> bool:
        return True

    def running(self, client: httpx.Client | None = None) -> list[dict]:
        """``/running``: the processes llama-swap lists, each with its ``model`` name (others left out)."""
        data = request_json(client or self.client, "GET", "/running")
        return model_list(data, f"GET {self.url}/running", key="running", id_keys=("model",), set_id=False)

    def model_status(self, name: str) -> str | None:
        for p in self.running():
            if p.get("model") == name:
                state = p.get("state") if isinstance(p.get("state"), str) else None
                return _STATUS.get(state, state)
        return "unloaded"

    def _require_running(self, model: str, what: str) -> None:
        if self.model_status(model) != "loaded":
            # an /upstream request would start the model: never load one just to read it
            raise BackendError("http", f"{what}: {model} is not running in llama-swap", status=409)

    def server_info(self, model: str | None = None) -> dict:
        """llama-swap's version (where it has ``/api/version``), what runs, and the upstream's /props."""
        info: dict = {"backend": self.kind, "running": self.running()}
        try:
            v = request_json(self.client, "GET", "/api/version", timeout=5.0)
        except BackendError:
            v = None
        if isinstance(v, dict):
            info["version"] = str(v.get("version") or "")
            info["llama_swap"] = v
        if model:
            self._require_running(model, "server_info")
            info["upstream"] = as_object(request_json(self.client, "GET", f"/upstream/{model}/props"),
                                         f"/upstream/{model}/props", required=True)
            info.update({k: v for k, v in info["upstream"].items() if k in ("build_info", "eos_token")})
        return info

    def metrics(self, model: str | None = None) -> dict:
        """The upstream llama-server's Prometheus counters (it needs ``--metrics``)."""
        if not model:
            raise not_supported(self.kind, "metrics are per upstream model")
        self._require_running(model, "metrics")
        text = request_json(self.client, "GET", f"/upstream/{model}/metrics", allow_text=True)
        if not isinstance(text, str):
            raise BackendError("protocol", f"/upstream/{model}/metrics: not Prometheus text")
        return parse_prometheus(text)

    def token_id(self, model: str, text: str) -> int | None:
        try:
            self._require_running(model, "tokenize")
            data = request_json(self.client, "POST", f"/upstream/{model}/tokenize",
                                json_body={"content": text, "parse_special": True})
        except BackendError:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            return None
        return tokens[0] if len(tokens) == 1 and isinstance(tokens[0], int) else None

    def count_tokens(self, model: str, text: str) -> int | None:
        """The length of ``text`` in the running model's tokenizer (its llama-server's ``/tokenize``)."""
        try:
            self._require_running(model, "tokenize")
            data = request_json(self.client, "POST", f"/upstream/{model}/tokenize",
                                json_body={"content": text, "add_special": False, "parse_special": False})
        except BackendError:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    # -- loads ---------------------------------------------------------------
    def load(self, name: str, *, poll_s: float = 0.05, limit_s: float | None = None, **_) -> LoadResult:
        """Start ``name`` through ``/upstream/{name}/health`` and wait for ``/running`` to say ready."""
        requested = utcnow()
        if self.model_status(name) == "loaded":
            return LoadResult(name, requested, None, None, "already_loaded")
        t0 = time.perf_counter()
        limit = limit_s or self.timeout_s
        try:
            request_json(self.client, "GET", f"/upstream/{name}/health", timeout=limit, allow_text=True)
        except BackendError as exc:
            if exc.kind == "connection":
                raise
            return LoadResult(name, requested, None, None, "failed", exc.text)
        while time.perf_counter() - t0 < limit:
            if self.model_status(name) == "loaded":
                return LoadResult(name, requested, utcnow(), time.perf_counter() - t0, "loaded")
            time.sleep(poll_s)
        return LoadResult(name, requested, None, None, "failed", f"not ready after {limit:.0f} s")

    def unload(self, name: str) -> None:
        """Stop ``name`` only. ``GET /unload`` stops every model, so it is used only when ``name`` runs alone."""
        try:
            request_json(self.client, "POST", f"/api/models/unload/{name}", allow_text=True, timeout=60.0)
        except BackendError as exc:
            if exc.status not in (404, 405):
                raise
            others = [p.get("model") for p in self.running() if p.get("model") != name]
            if others:
                raise BackendError("http", f"this llama-swap can only unload all models, and {', '.join(others)} "
                                           f"also run; not unloading them", status=501) from exc
            request_json(self.client, "GET", "/unload", allow_text=True, timeout=60.0)
        deadline = time.perf_counter() + 60.0
        while time.perf_counter() < deadline:
            if self.model_status(name) == "unloaded":
                return
            time.sleep(0.05)
        raise BackendError("protocol", f"{name} still listed by /running after unload")

    def watch_load(self, name: str) -> "SwapLoadWatcher":
        return SwapLoadWatcher(self, name)


class SwapLoadWatcher(PollingLoadWatcher):
    """Times a swap that happens inside a measured request by polling ``/running``."""

    def __init__(self, backend: LlamaSwapBackend, name: str, poll_s: float = 0.02):
        self._client = backend.side_client()
        self._backend = backend
        super().__init__(name, poll_s)

    def _poll(self) -> tuple[str | None, int | None]:
        try:
            for p in self._backend.running(client=self._client):
                if p.get("model") == self.name:
                    return ("ready" if p.get("state") == "ready" else "loading"), None
        except BackendError:
            return None, None  # /running unreadable
        return "loading", None  # not running: this request starts it


BACKEND = LlamaSwapBackend
