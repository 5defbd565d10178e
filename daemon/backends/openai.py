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

import httpx

from ..store import utcnow
from .base import BackendError, LoadResult, SampleResult
from .http import check_stream_status, chat_raw, client_address, make_client, not_supported, request_json, sse_chunks
from .shapes import chunk_pieces, timings_counters, usage_counts
from .validate import model_list

COUNTERS = "timings"
WALL_CLOCK = "wall_clock_stream"


class OpenAICompatBackend:
    """``/v1/models`` and streamed ``/v1/chat/completions``; no loads, no metrics."""

    kind = "openai"

    def __init__(self, url: str, *, timeout_s: float = 300.0, use_counters: bool = True,
                 api_key: str | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.use_counters = use_counters
        self.client = make_client(self.url, timeout_s)
        if api_key:
            self.client.headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        self.client.close()

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
        return body

    def chat(self, model: str, prompt: str, *, max_tokens: int, reasoning: bool, extra: dict | None = None,
             client: httpx.Client | None = None) -> SampleResult:
        """One streamed request; ``client`` lets a canary speak from another address."""
        body = self.request_body(model, prompt, max_tokens, reasoning, extra)
        return stream_chat(client or self.client, "/v1/chat/completions", body, prompt_chars=len(prompt),
                           timeout_s=self.timeout_s, use_counters=self.use_counters)


def stream_chat(client: httpx.Client, path: str, body: dict, *, prompt_chars: int, timeout_s: float,
                use_counters: bool = True) -> SampleResult:
    """Send ``body`` as a streamed chat completion and build the sample from what came back."""
    answer: list[str] = []
    thinking: list[str] = []
    stamps: list[float] = []  # perf_counter at each chunk that carried text
    final: dict = {}
    finish_reason = None
    t0 = time.perf_counter()
    try:
        # a fresh connection per measured request (see the llama-server backend)
        with client.stream("POST", path, json=body, headers={"Connection": "close"}) as r:
            final["client_addr"] = client_address(r)
            check_stream_status(r)
            for chunk in sse_chunks(r):
                for piece in chunk_pieces(chunk):
                    if piece.content or piece.reasoning:
                        stamps.append(time.perf_counter())
                    answer.append(piece.content)
                    thinking.append(piece.reasoning)
                    finish_reason = piece.finish_reason or finish_reason
                if chunk.get("timings") is not None:
                    final["timings"] = chunk["timings"]
                if chunk.get("usage") is not None:
                    final["usage"] = chunk["usage"]
    except httpx.TimeoutException as exc:
        raise BackendError("timeout", f"no answer within {timeout_s:.0f} s: {exc}") from exc
    except httpx.TransportError as exc:
        raise BackendError("connection", f"{type(exc).__name__}: {exc}") from exc
    except httpx.HTTPError as exc:  # e.g. a body that does not decode as its Content-Encoding says
        raise BackendError("protocol", f"{type(exc).__name__}: {exc}") from exc
    wall_ms = (time.perf_counter() - t0) * 1000.0
    final["finish_reason"] = finish_reason
    final["answer"] = "".join(answer)
    final["reasoning"] = "".join(thinking)
    usage = usage_counts(final)  # checked even where timings are used: it is stored with the sample
    final["wall_clock"] = wall_clock_rates(t0, stamps, usage)
    # an empty timings object carries no counters; one of the wrong kind is an error (timings_counters)
    counted = use_counters and final.get("timings") not in (None, {})
    rates = _from_counters(final) if counted else _from_wall_clock(final, usage)
    ttft_ms = (stamps[0] - t0) * 1000.0 if stamps else None
    return SampleResult(
        ttft_ms=ttft_ms, wall_ms=wall_ms, stop_reason=finish_reason,
        answer_chars=len(final["answer"]), reasoning_chars=len(final["reasoning"]),
        request={k: v for k, v in body.items() if k != "messages"} | {"prompt_chars": prompt_chars},
        response=final, **rates,
    )


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
