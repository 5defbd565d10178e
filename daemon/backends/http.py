"""HTTP plumbing shared by the Ollama, llama-swap and OpenAI-compatible backends.

Every failure becomes a :class:`BackendError` whose text names the method,
URL and the server's own words, so the runner can store it on the exception
path (principle 4) without knowing which backend it talked to.
"""

from __future__ import annotations

import json
from typing import Iterator

import httpx

from .base import BackendError


def make_client(url: str, timeout_s: float) -> httpx.Client:
    """One client per backend; the connect timeout stays short so a dead server is noticed fast."""
    return httpx.Client(base_url=url, timeout=httpx.Timeout(timeout_s, connect=5.0))


def request_json(client: httpx.Client, method: str, path: str, *, json_body=None, params=None,
                 timeout: float = 15.0, allow_text: bool = False):
    """Send one request and return parsed JSON (or the text, when ``allow_text``)."""
    where = f"{method} {str(client.base_url).rstrip('/')}{path}"
    try:
        r = client.request(method, path, json=json_body, params=params, timeout=timeout)
    except httpx.TimeoutException as exc:
        raise BackendError("timeout", f"{where}: {exc}") from exc
    except httpx.TransportError as exc:
        raise BackendError("connection", f"{where}: {exc}") from exc
    if r.status_code >= 400:
        raise BackendError("http", f"{where}: HTTP {r.status_code}: {r.text[:300]}", status=r.status_code)
    try:
        return r.json()
    except ValueError as exc:
        if allow_text:
            return r.text
        raise BackendError("protocol", f"{where}: not JSON: {r.text[:200]!r}") from exc


def check_stream_status(response: httpx.Response) -> None:
    """An error status on a streamed request, with the server's own words."""
    if response.status_code >= 400:
        text = response.read().decode("utf-8", "replace")
        raise BackendError("http", f"HTTP {response.status_code}: {text[:500]}", status=response.status_code)


def sse_chunks(response: httpx.Response) -> Iterator[dict]:
    """The JSON chunks of an OpenAI-style event stream, up to ``[DONE]``.

    An unreadable chunk is a protocol error and an ``error`` chunk an HTTP
    error, both with the server's text: never a silently shorter answer.
    """
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise BackendError("protocol", f"unreadable stream chunk: {payload[:200]!r}") from exc
        if "error" in chunk:
            raise BackendError("http", f"error in stream: {json.dumps(chunk['error'])[:500]}")
        yield chunk


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> ``{name without prefix: value}`` (labels kept in the name)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key.split(":", 1)[-1]] = float(value)
        except ValueError:
            continue
    return out


def not_supported(kind: str, what: str) -> BackendError:
    """The error a backend raises for a feature its server does not have (HTTP 501 semantics)."""
    return BackendError("http", f"{kind}: {what}", status=501)


def client_address(response: httpx.Response) -> str | None:
    """The local address this request left from: the access log names us by it.

    Knowing our own address lets the foreign-load check tell our requests
    from other clients' in the server's access log.
    """
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    try:
        addr = stream.get_extra_info("client_addr")
    except Exception:  # a transport without socket details (e.g. a mock)
        return None
    return addr[0] if isinstance(addr, tuple) and addr else None


def chat_raw(client: httpx.Client, model: str, body: dict, timeout_s: float) -> dict:
    """One non-streamed ``/v1/chat/completions`` with a caller-built body (probes: tools, images).

    Not a measurement: no counters are read. Ollama, llama-swap and generic
    servers all answer this OpenAI-compatible path, so a probe written for
    llama-server runs against them unchanged.
    """
    data = request_json(client, "POST", "/v1/chat/completions", json_body=body | {"model": model, "stream": False},
                        timeout=timeout_s)
    if not isinstance(data, dict) or "error" in data:
        raise BackendError("http", f"error in answer: {str(data)[:500]}")
    return data
