"""Any OpenAI-compatible endpoint: vLLM, LM Studio, llama-server's ``/v1``, ...

Such a server owes us no counters. Where the stream carries llama.cpp's
``timings`` (llama-server, or llama-swap passing them through) those are
used, as with the llama-server backend. Otherwise the decode rate is
derived from the wall clock between the first and the last streamed token,
and the sample says so (``counter_source = wall_clock_stream``): weaker
evidence than a counter, because it includes the network, the server's
batching and our own reading (principle 1). The report labels it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import httpx

from ..store import utcnow
from .base import BackendError, LoadResult, SampleResult
from .http import answer_errors, chat_raw, check_stream_status, client_address, not_supported, request_json, sse_chunks
from .interface import Backend
from .shapes import chunk_pieces, timings_counters, usage_counts
from .validate import model_list

COUNTERS = "timings"
WALL_CLOCK = "wall_clock_stream"


class OpenAICompatBackend(Backend):
    """``/v1/models`` and streamed ``/v1/chat/completions``; no loads, no metrics."""

    kind = "openai"
    order = 40
    options = ("api_key",)
    #: llama.cpp servers behind this API reuse a cached prompt unless told not to
    sends_cache_prompt = False

    def __init__(self, url: str, *, timeout_s: float = 300.0, use_counters: bool = True,
                 api_key: str | None = None):
        super().__init__(url, timeout_s=timeout_s)
        self.use_counters = use_counters
        if api_key:
            self.client.headers["Authorization"] = f"Bearer {api_key}"

    # -- what the server says about itself ---------------------------------
    def models(self) -> list[dict]:
        """``/v1/models``; entries that name no model (a bare string, no ``id``) are left out."""
        return model_list(request_json(self.client, "GET", "/v1/models"), f"GET {self.url}/v1/models")

    def is_router(self) -> bool:
        # a generic endpoint gives no handle on loads: treat it as one fixed server
        return False

    def model_status(self, name: str) -> str | None:
        return None

    def server_info(self, model: str | None = None) -> dict:
        """The model list (and ``/version`` where the server has one, as vLLM does)."""
        info: dict = {"backend": self.kind}
        try:
            info["models"] = [m["id"] for m in self.models()]
        except BackendError as exc:
            if exc.kind != "protocol":
                raise
            info["models_error"] = exc.text  # an unreadable listing does not stop the run
        try:
            version = request_json(self.client, "GET", "/version", timeout=5.0)
        except BackendError:
            version = None
        if isinstance(version, dict) and version.get("version"):
            info["version"] = str(version["version"])
        return info

    def metrics(self, model: str | None = None) -> dict:
        raise not_supported(self.kind, "no counters endpoint on a generic OpenAI-compatible server")

    def token_id(self, model: str, text: str) -> int | None:
        return None

    def unload(self, name: str) -> None:
        raise not_supported(self.kind, "a generic OpenAI-compatible server cannot be asked to unload")

    def load(self, name: str, **_) -> LoadResult:
        now = utcnow()
        return LoadResult(name, now, now, None, "already_loaded")

    def watch_load(self, name: str):
        raise not_supported(self.kind, "loads are not observable")

    def chat_raw(self, model: str, body: dict, *, timeout_s: float | None = None) -> dict:
        """A non-streamed request for probes (see :func:`http.chat_raw`)."""
        return chat_raw(self.client, model, body, timeout_s or self.timeout_s)

    # -- one measured request ----------------------------------------------
    def request_body(self, model: str, prompt: str, max_tokens: int, reasoning: bool, extra: dict | None) -> dict:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            # vLLM, SGLang and llama-server read this; others ignore it. The request
            # is stored, so what was asked is on record either way.
            "chat_template_kwargs": {"enable_thinking": reasoning},
        }
        if extra:
            body.update(extra)
        if self.sends_cache_prompt:
            body.setdefault("cache_prompt", False)  # what the run asks of a llama.cpp server: no cache reuse
        return body

    def chat(self, model: str, prompt: str, *, max_tokens: int, reasoning: bool, extra: dict | None = None,
             client: httpx.Client | None = None) -> SampleResult:
        """One streamed request; ``client`` lets a canary speak from another address."""
        body = self.request_body(model, prompt, max_tokens, reasoning, extra)
        return stream_chat(client or self.client, "/v1/chat/completions", body, prompt_chars=len(prompt),
                           timeout_s=self.timeout_s, use_counters=self.use_counters)


@dataclass
class Streamed:
    """What one streamed chat completion brought, before any backend reads counters from it.

    ``timings`` and ``usage`` hold every value the stream sent under that
    key, in order (nulls included): the backends differ in which one counts.
    """

    answer: str
    reasoning: str
    finish_reason: str | None
    stamps: list[float]  # perf_counter at each chunk that carried text
    t0: float
    wall_ms: float
    timings: list = field(default_factory=list)
    usage: list = field(default_factory=list)
    client_addr: str | None = None

    @property
    def ttft_ms(self) -> float | None:
        return (self.stamps[0] - self.t0) * 1000.0 if self.stamps else None

    @property
    def chunk_ms(self) -> list[float]:
        return [(t - self.t0) * 1000.0 for t in self.stamps]


def read_stream(client: httpx.Client, path: str, body: dict, *, timeout_s: float) -> Streamed:
    """Send ``body`` as a streamed chat completion and collect text, counters and arrival times."""
    answer: list[str] = []
    thinking: list[str] = []
    stamps: list[float] = []
    timings: list = []
    usage: list = []
    finish_reason = None
    addr = None
    t0 = time.perf_counter()
    with answer_errors(timeout_s):
        # A fresh connection per measured request: llama-server's router sometimes
        # drops a kept-alive connection between requests, which would turn into a
        # false "server disconnected" exception.
        with client.stream("POST", path, json=body, headers={"Connection": "close"}) as r:
            addr = client_address(r)
            check_stream_status(r)
            for chunk in sse_chunks(r):
                for piece in chunk_pieces(chunk):
                    if piece.content or piece.reasoning:
                        stamps.append(time.perf_counter())
                    answer.append(piece.content)
                    thinking.append(piece.reasoning)
                    finish_reason = piece.finish_reason or finish_reason
                if "timings" in chunk:
                    timings.append(chunk["timings"])
                if "usage" in chunk:
                    usage.append(chunk["usage"])
    wall_ms = (time.perf_counter() - t0) * 1000.0
    return Streamed("".join(answer), "".join(thinking), finish_reason, stamps, t0, wall_ms, timings, usage, addr)


def _last(values: list, keep) -> object:
    """The last of ``values`` that ``keep`` accepts, else None."""
    return next((v for v in reversed(values) if keep(v)), None)


def stream_chat(client: httpx.Client, path: str, body: dict, *, prompt_chars: int, timeout_s: float,
                use_counters: bool = True) -> SampleResult:
    """Send ``body`` as a streamed chat completion and build the sample from what came back."""
    s = read_stream(client, path, body, timeout_s=timeout_s)
    final: dict = {"client_addr": s.client_addr}
    for key, values in (("timings", s.timings), ("usage", s.usage)):
        value = _last(values, lambda v: v is not None)  # a null is no counter and hides none sent before
        if value is not None:
            final[key] = value
    final["finish_reason"] = s.finish_reason
    final["answer"] = s.answer
    final["reasoning"] = s.reasoning
    usage = usage_counts(final)  # checked even where timings are used: it is stored with the sample
    final["wall_clock"] = wall_clock_rates(s.t0, s.stamps, usage)
    # an empty timings object carries no counters; one of the wrong kind is an error (timings_counters)
    counted = use_counters and final.get("timings") not in (None, {})
    rates = _from_counters(final) if counted else _from_wall_clock(final, usage)
    return SampleResult(
        ttft_ms=s.ttft_ms, wall_ms=s.wall_ms, stop_reason=s.finish_reason,
        answer_chars=len(final["answer"]), reasoning_chars=len(final["reasoning"]),
        request=request_record(body, prompt_chars),
        response=final, chunk_ms=s.chunk_ms, **rates,
    )


def request_record(body: dict, prompt_chars: int) -> dict:
    """The request as stored with its sample: everything but the prompt text, and the prompt's length."""
    return {k: v for k, v in body.items() if k != "messages"} | {"prompt_chars": prompt_chars}


def wall_clock_rates(t0: float, stamps: list[float], usage: dict | None) -> dict:
    """Rates from arrival times: the first token bounds prefill, first-to-last bounds decode.

    The generated count comes from ``usage`` when the server sends it, else
    from the number of chunks that carried text (one token per chunk is
    usual but not promised: ``count_basis`` says which).
    """
    usage = usage or {}  # checked counts (shapes.usage_counts)
    n = usage.get("completion_tokens")
    basis = "usage"
    if n is None:
        n, basis = len(stamps), "chunks"
    out = {"generated_tokens": n, "count_basis": basis, "prompt_tokens": usage.get("prompt_tokens"),
           "ttft_ms": None, "decode_ms": None, "decode_tps": None, "prefill_tps": None}
    if stamps:
        out["ttft_ms"] = (stamps[0] - t0) * 1000.0
        if out["prompt_tokens"] and out["ttft_ms"] > 0:
            out["prefill_tps"] = out["prompt_tokens"] / (out["ttft_ms"] / 1000.0)
    if len(stamps) > 1 and n and n > 1:
        span = stamps[-1] - stamps[0]
        out["decode_ms"] = span * 1000.0
        # n tokens arrive in n-1 intervals after the first one
        out["decode_tps"] = (n - 1) / span if span > 0 else None
    return out


def _from_counters(final: dict) -> dict:
    return timings_counters(final) | {"counter_source": COUNTERS}


def _from_wall_clock(final: dict, usage: dict) -> dict:
    w = final["wall_clock"]
    return dict(
        prompt_tokens=w["prompt_tokens"], generated_tokens=w["generated_tokens"],
        prompt_ms=w["ttft_ms"], predicted_ms=w["decode_ms"],
        prefill_tps=w["prefill_tps"], decode_tps=w["decode_tps"],
        draft_tokens=None, draft_accepted=None,
        cached_tokens=usage.get("cached_tokens"), counter_source=WALL_CLOCK,
    )


BACKEND = OpenAICompatBackend
