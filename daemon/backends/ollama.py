"""Ollama over its own API (``/api/chat``, ``/api/ps``, ``/api/show``, ``/api/version``).

Throughput comes from the nanosecond counters of the final stream object
(``eval_count / eval_duration``, ``prompt_eval_count /
prompt_eval_duration``), never from the clock (principle 1). Each sample
also keeps Ollama's ``load_duration`` (the ``load_time`` gate reads it) and
the model's ``/api/ps`` entry taken right after the answer (``size_vram /
size`` is the runtime's own GPU share for ``not_on_card``; the card's own
figure comes from NVML, principle 5).

Field names and shapes follow Ollama's API reference (docs/api.md and
docs/openapi.yaml in github.com/ollama/ollama).
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import httpx

from cardproof.daemon.server.modelfile import blob_digest, gguf_header
from ..store import json_text, utcnow
from .base import BackendError, LoadResult, SampleResult
from .http import answer_errors, chat_raw, check_stream_status, client_address, json_lines, not_supported, request_json
from .interface import Backend
from .shapes import ollama_final
from .validate import MAX_VALUE, as_object, as_text, model_list, show

COUNTERS = "ollama_counters"
NS = 1e9

# the weights file in /api/show's modelfile
_FROM_BLOB = re.compile(r"(?m)^FROM (\S*blobs[/\\]sha256[:-][0-9a-f]{64})")
# llama-server request fields the canaries use; Ollama has no equivalent, so
# they are dropped and the request records that they were.
_NO_EQUIVALENT = {"ignore_eos", "cache_prompt", "logit_bias", "chat_template_kwargs", "stream_options"}


def same_model(a: str | None, b: str | None) -> bool:
    """Ollama names ``llama3.2`` and ``llama3.2:latest`` the same model."""
    if not a or not b:
        return False
    return (a if ":" in a else a + ":latest") == (b if ":" in b else b + ":latest")


def ps_entry(ps: dict, model: str) -> dict | None:
    """The ``/api/ps`` entry of ``model``, or None when it is not loaded.

    Its ``size``/``size_vram`` are checked here: the gates and the memory
    section divide them.
    """
    for entry in model_list(ps, "/api/ps", key="models", id_keys=("name", "model"), set_id=False):
        if same_model(entry.get("name"), model) or same_model(entry.get("model"), model):
            for key in ("size", "size_vram"):
                value = entry.get(key)
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                          or not 0 <= value <= MAX_VALUE):
                    raise BackendError("protocol", f"/api/ps: models[{model}].{key} is not a byte count: "
                                                   f"{show(value)}")
            return entry
    return None


class OllamaBackend(Backend):
    kind = "ollama"
    order = 20
    options = ("num_ctx",)

    def __init__(self, url: str, *, timeout_s: float = 300.0, num_ctx: int | None = None,
                 unload_wait_s: float = 30.0):
        super().__init__(url, timeout_s=timeout_s)
        # None: Ollama's own default applies (and /api/ps records what it chose)
        self.num_ctx = num_ctx
        self.unload_wait_s = unload_wait_s
        self._shows: dict[str, dict] = {}
        self._seen_prompts: dict[tuple[str, str], int] = {}
        self.last_final: dict = {}

    # -- what the server says about itself ---------------------------------
    def version(self) -> str | None:
        data = request_json(self.client, "GET", "/api/version")
        version = data.get("version") if isinstance(data, dict) else None
        return version if isinstance(version, str) else None

    def ps(self, client: httpx.Client | None = None) -> dict:
        """``GET /api/ps``: the models in memory with ``size``, ``size_vram``, ``context_length``."""
        data = request_json(client or self.client, "GET", "/api/ps")
        return as_object(data, "GET /api/ps", required=True)

    def show(self, model: str) -> dict:
        """``POST /api/show`` (capabilities, details, model_info), cached per model."""
        if model not in self._shows:
            data = request_json(self.client, "POST", "/api/show", json_body={"model": model})
            self._shows[model] = as_object(data, "POST /api/show", required=True)
        return self._shows[model]

    def model_blob(self, model: str) -> str | None:
        """The model's weights file as ``/api/show``'s ``modelfile`` names it (``FROM .../blobs/sha256-…``)."""
        try:
            modelfile = as_text(self.show(model).get("modelfile"), "modelfile") or ""
        except BackendError:
            return None
        m = _FROM_BLOB.search(modelfile)
        return m[1] if m else None

    def runner_arg(self, model: str) -> str | None:
        """What the model's runner has on its command line: ``sha256-<hex>`` of the blob after ``--model``.

        The memory capture finds the runner process by it (``/proc/PID/cmdline``).
        Older API docs print the blob as ``sha256:<hex>``; on disk and on the
        runner's command line it is ``sha256-<hex>``.
        """
        hexdigest = blob_digest(self.model_blob(model))
        return f"sha256-{hexdigest}" if hexdigest else None

    def model_card(self, name: str) -> dict | None:
        """``/api/show``: its ``capabilities`` list is what the probes hold the model to."""
        return self.show(name)

    def capabilities(self, model: str) -> list[str]:
        try:
            listed = self.show(model).get("capabilities")
        except BackendError:
            return []
        return [c for c in listed if isinstance(c, str)] if isinstance(listed, list) else []

    def models(self) -> list[dict]:
        """Installed models (``/api/tags``), each with ``id`` as the runner expects."""
        data = request_json(self.client, "GET", "/api/tags")
        return model_list(data, "GET /api/tags", key="models", id_keys=("name", "model"))

    def describe_model(self, name: str) -> dict:
        """Columns for the ``models`` row from Ollama's own records (tags and show)."""
        row: dict = {"name": name}
        for m in self.models():
            if same_model(m["id"], name):
                details = m.get("details") if isinstance(m.get("details"), dict) else {}
                row.update(file_bytes=_whole(m.get("size")), digest=_text(m.get("digest")),
                           digest_kind="ollama-manifest", quantisation=_text(details.get("quantization_level")))
        try:
            show = self.show(name)
        except BackendError:
            return row
        info = show.get("model_info") if isinstance(show.get("model_info"), dict) else {}
        details = show.get("details") if isinstance(show.get("details"), dict) else {}
        row["architecture"] = _text(info.get("general.architecture")) or _text(details.get("family"))
        row.update(self._shape(name, info))
        row["capabilities_json"] = json_text(  # the server's own values: no NaN in the store
            {"capabilities": show.get("capabilities") or [], "thinking": show.get("thinking"),
             "projector_info": show.get("projector_info"), "source": "ollama /api/show"}, sort_keys=True)
        return {k: v for k, v in row.items() if v is not None}

    def _shape(self, name: str, info: dict) -> dict:
        """The model's shape as ``daemon/modelfile.gguf_header`` states it (the findings group by it).

        Where the blob is a file on this machine (Ollama on the same host, its models folder readable),
        its own GGUF header: parameters, experts, active parameters, base name and tokenizer hash, as for a
        llama-server model. Otherwise what ``/api/show``'s ``model_info`` says: the parameter count Ollama
        took from the tensors, the expert counts and the base name; a dense model's active parameters are
        all of them, a mixture of experts' stay unknown (no tensor list without ``verbose``), and there is no
        tokenizer hash, so no quantisation ladder is stated from such models: never a guess.
        """
        blob = self.model_blob(name)
        if blob:
            path = Path(blob)
            path = path.with_name(path.name.replace("sha256:", "sha256-"))
            try:
                header = gguf_header(path) if path.is_file() else {}
            except OSError:
                header = {}
            if header.get("params"):
                return {k: v for k, v in header.items() if k != "split_parts"}
        out: dict = {}
        arch = _text(info.get("general.architecture"))
        params = _whole(info.get("general.parameter_count"))
        if _text(info.get("general.basename")):
            out["basename"] = info["general.basename"]
        if params:
            out["params"] = params
            count = _whole(info.get(f"{arch}.expert_count")) if arch else None
            used = _whole(info.get(f"{arch}.expert_used_count")) if arch else None
            out["expert_count"], out["expert_used_count"] = count or 0, used or 0
            if not count:
                out["active_params"] = params
        return out

    def is_router(self) -> bool:
        # Ollama loads and evicts models on demand, as llama-server's router does
        return True

    def model_status(self, name: str) -> str | None:
        return "loaded" if ps_entry(self.ps(), name) else "unloaded"

    def server_info(self, model: str | None = None) -> dict:
        info = {"backend": self.kind, "version": self.version(), "num_ctx_requested": self.num_ctx}
        if model:
            info["capabilities"] = self.capabilities(model)
        return info

    def metrics(self, model: str | None = None) -> dict:
        raise not_supported(self.kind, "Ollama has no /metrics; foreign requests come from its access log")

    def token_id(self, model: str, text: str) -> int | None:
        return None  # no tokenizer endpoint

    def _options(self, **more) -> dict:
        opts = {k: v for k, v in more.items() if v is not None}
        if self.num_ctx:
            opts["num_ctx"] = self.num_ctx  # must match the chat's, or Ollama reloads
        return opts

    # -- loads ---------------------------------------------------------------
    def load(self, name: str, *, limit_s: float | None = None, **_) -> LoadResult:
        """Load ``name`` with an empty ``/api/generate`` request and time it (wall clock)."""
        requested = utcnow()
        if ps_entry(self.ps(), name):
            return LoadResult(name, requested, None, None, "already_loaded")
        body = {"model": name, "stream": False}
        if self._options():
            body["options"] = self._options()
        t0 = time.perf_counter()
        try:
            request_json(self.client, "POST", "/api/generate", json_body=body, timeout=limit_s or self.timeout_s)
        except BackendError as exc:
            if exc.kind == "connection":
                raise
            return LoadResult(name, requested, None, None, "failed", exc.text)
        secs = time.perf_counter() - t0
        if not ps_entry(self.ps(), name):
            return LoadResult(name, requested, None, None, "failed", "load returned, but /api/ps does not list it")
        return LoadResult(name, requested, utcnow(), secs, "loaded")

    def unload(self, name: str) -> None:
        """``keep_alive: 0``, then wait until ``/api/ps`` no longer lists it (release and verify)."""
        request_json(self.client, "POST", "/api/generate", json_body={"model": name, "keep_alive": 0},
                     timeout=self.unload_wait_s)
        deadline = time.perf_counter() + self.unload_wait_s
        while time.perf_counter() < deadline:
            if not ps_entry(self.ps(), name):
                return
            time.sleep(0.1)
        raise BackendError("protocol", f"{name} still listed by /api/ps {self.unload_wait_s:.0f} s after keep_alive 0")

    def watch_load(self, name: str) -> "OllamaLoadWatcher":
        return OllamaLoadWatcher(self, name)

    def chat_raw(self, model: str, body: dict, *, timeout_s: float | None = None) -> dict:
        """A non-streamed request for probes, through Ollama's OpenAI-compatible ``/v1/chat/completions``."""
        return chat_raw(self.client, model, body, timeout_s or self.timeout_s)

    # -- one measured request --------------------------------------------------
    def chat(self, model: str, prompt: str, *, max_tokens: int, reasoning: bool, extra: dict | None = None,
             client: httpx.Client | None = None) -> SampleResult:
        """One streamed ``/api/chat``; ``client`` lets a canary speak from another address."""
        body: dict = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
                      "options": self._options(num_predict=max_tokens)}
        notes = {}
        if "thinking" in self.capabilities(model):
            body["think"] = reasoning
        else:
            # Ollama rejects ``think`` for a model without the capability
            notes["think_omitted"] = "the model does not declare the thinking capability"
        for key, value in (extra or {}).items():
            if key in _NO_EQUIVALENT:
                notes.setdefault("dropped", []).append(key)
            elif key == "options":
                body["options"].update(value)
            else:
                body[key] = value
        final, parts, ttft_ms, wall_ms = self._stream(client or self.client, body)
        answer, thinking = parts
        key = (model, hashlib.sha256(prompt.encode()).hexdigest())
        counters = ollama_final(final)
        count = counters["prompt_eval_count"]
        cached = None
        if key in self._seen_prompts and count is not None:
            # the same prompt text again: whatever Ollama no longer evaluated came from its cache
            cached = max(0, self._seen_prompts[key] - count)
        elif count is not None:
            self._seen_prompts[key] = count
        try:
            final["ps"] = ps_entry(self.ps(client=self.side_client()), model)
        except BackendError as exc:
            final["ps_error"] = exc.text
        final.update(answer="".join(answer), reasoning="".join(thinking), finish_reason=counters["done_reason"])
        self.last_final = final
        return SampleResult(
            prompt_tokens=count, generated_tokens=counters["eval_count"],
            prompt_ms=_ms(counters["prompt_eval_duration"]), predicted_ms=_ms(counters["eval_duration"]),
            prefill_tps=_rate(count, counters["prompt_eval_duration"]),
            decode_tps=_rate(counters["eval_count"], counters["eval_duration"]),
            ttft_ms=ttft_ms, wall_ms=wall_ms, stop_reason=counters["done_reason"],
            answer_chars=len(final["answer"]), reasoning_chars=len(final["reasoning"]),
            draft_tokens=None, draft_accepted=None, cached_tokens=cached, counter_source=COUNTERS,
            request={k: v for k, v in body.items() if k != "messages"} | {"prompt_chars": len(prompt)} | notes,
            response=final,
        )

    def _stream(self, client: httpx.Client, body: dict):
        answer: list[str] = []
        thinking: list[str] = []
        final: dict = {}
        ttft_ms = None
        t0 = time.perf_counter()
        with answer_errors(self.timeout_s):
            with client.stream("POST", "/api/chat", json=body, headers={"Connection": "close"}) as r:
                addr = client_address(r)
                check_stream_status(r)
                for obj in json_lines(r):
                    if obj.get("error"):
                        raise BackendError("http", f"error in stream: {str(obj['error'])[:500]}")
                    msg = as_object(obj.get("message"), "message") or {}
                    content = as_text(msg.get("content"), "message.content") or ""
                    thought = as_text(msg.get("thinking"), "message.thinking") or ""
                    if (content or thought) and ttft_ms is None:
                        ttft_ms = (time.perf_counter() - t0) * 1000.0
                    answer.append(content)
                    thinking.append(thought)
                    if obj.get("done"):
                        final = {k: v for k, v in obj.items() if k != "message"}
                        break
        if not final:
            raise BackendError("protocol", "stream ended without a final object (no counters)",
                               partial={"answer": "".join(answer)})
        final["client_addr"] = addr
        return final, (answer, thinking), ttft_ms, (time.perf_counter() - t0) * 1000.0


def _whole(value) -> int | None:
    """A byte count from a listing, or None: a wrong kind here is no reason to stop a run."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_VALUE
    return value if ok else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _ms(ns) -> float | None:
    return ns / 1e6 if isinstance(ns, (int, float)) else None


def _rate(count, ns) -> float | None:
    if not isinstance(count, (int, float)) or not isinstance(ns, (int, float)) or ns <= 0:
        return None  # a zero duration is no rate; counter_sanity reports it
    return count / (ns / NS)


class OllamaLoadWatcher:
    """Notices a load inside a measured request; its duration is Ollama's own ``load_duration``.

    ``/api/ps`` is read once before the request: a model not listed there
    will be loaded by the request itself. The duration is not polled: the
    final stream object carries it, in nanoseconds.
    """

    def __init__(self, backend: OllamaBackend, name: str):
        self.backend = backend
        self.name = name
        self.requested_at = utcnow()
        self.ready_at: str | None = None
        self.load_seconds: float | None = None
        self.port: int | None = None
        backend.last_final = {}
        try:
            self.load_seen = ps_entry(backend.ps(client=backend.side_client()), name) is None
        except BackendError:
            self.load_seen = False

    def stop(self, settle_s: float = 0.0) -> None:
        if not self.load_seen:
            return
        ns = self.backend.last_final.get("load_duration")
        if isinstance(ns, (int, float)) and not isinstance(ns, bool):  # checked by shapes.ollama_final
            self.load_seconds = ns / NS
            self.ready_at = utcnow()


BACKEND = OllamaBackend
