"""HTTP plumbing shared by the Ollama, llama-swap and OpenAI-compatible backends.

Every failure becomes a :class:`BackendError` whose text names the method,
URL and the server's own words, so the runner can store it on the exception
path (principle 4) without knowing which backend it talked to.
"""

from __future__ import annotations

import base64
import codecs
import functools
import http.client
import json
import math
import re
import ssl
import threading
import urllib.parse
from contextlib import contextmanager
from typing import Iterable, Iterator

import httpx
from httpx_sse import EventSource, SSEError
from prometheus_client.parser import text_string_to_metric_families

from .base import BackendError
from .validate import malformed


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """httpx's own default context (certifi, or SSL_CERT_FILE/SSL_CERT_DIR), made once per process."""
    return httpx.create_ssl_context()


def tls_verify(url: str) -> ssl.SSLContext | bool:
    """``verify`` for an httpx client of ``url``.

    Every httpx client loads the certificate store anew (18-30 ms here),
    and a run makes several (the backend's, its side client, a step's): on
    a run of eight short requests that was 4-5 ms of every request
    (``bench/runner_overhead.py --phases``). A plain-HTTP server needs no
    certificates at all; an HTTPS one gets one context shared by all
    clients, with the same trust httpx would give each.
    """
    return False if url.startswith("http://") else _tls_context()


def make_client(url: str, timeout_s: float, *, keep_alive: bool = False) -> httpx.Client:
    """One client per backend; the connect timeout stays short so a dead server is noticed fast.

    No connection is kept alive between requests unless ``keep_alive``: llama-server's router
    (cpp-httplib) sometimes closes an idle kept-alive connection just as the next request is sent on
    it, which httpx reports as "Server disconnected without sending a response": a false connection
    error on a sample or a probe (seen as a probe's ERROR in CI, about one run in two on a quiet
    machine). A ``Connection: close`` on the request itself does not help when an earlier request (a
    status poll) left the connection in the pool. ``keep_alive`` is for the side client's status
    polls, which read a failed poll as "state unknown" and poll again: a fresh connection per poll
    cost 0.5-1.5 ms of every measured request here (``bench/runner_overhead.py --phases``).
    """
    return httpx.Client(base_url=url, timeout=httpx.Timeout(timeout_s, connect=5.0), verify=tls_verify(url),
                        limits=httpx.Limits(max_keepalive_connections=20 if keep_alive else 0))


class StatusPoller:
    """GET-and-JSON status polls on one kept-alive connection (the standard library's ``http.client``).

    A router's model status is asked before every measured request (is the
    model loaded, or will this request load it?). Through httpx that poll
    cost 0.4-0.8 ms of client CPU and about 1 ms of every request's wall
    time here; this costs a third of it (``bench/runner_overhead.py
    --phases``). A server that closed the kept-alive connection in the
    meantime is asked once more on a fresh one, so a stale connection never
    reads as "state unknown". Thread-safe: polls from several streams take
    turns. A failure raises a :class:`BackendError`, as :func:`request_json` does.
    """

    def __init__(self, url: str, timeout_s: float = 5.0, headers: dict | None = None):
        u = urllib.parse.urlsplit(url)
        self.url = url.rstrip("/")
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname or "localhost", u.port
        self._prefix = u.path.rstrip("/")
        self._headers = dict(headers or {})
        if u.username is not None and "authorization" not in {k.lower() for k in self._headers}:
            login = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
            self._headers["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode("ascii")
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                               context=_tls_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def get_json(self, path: str):
        where = f"GET {self.url}{path}"
        with self._lock:
            for fresh in (self._conn is None, True):
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    self._conn.request("GET", self._prefix + path, headers=self._headers)
                    resp = self._conn.getresponse()
                    body = resp.read()
                except TimeoutError as exc:
                    self.close()
                    raise BackendError("timeout", f"{where}: {exc}") from exc
                except (http.client.HTTPException, OSError) as exc:
                    self.close()
                    if not fresh:
                        continue  # the server closed the idle connection: once more on a new one
                    raise BackendError("connection", f"{where}: {type(exc).__name__}: {exc}") from exc
                if resp.will_close:
                    self.close()
                break
        if resp.status >= 400:
            raise BackendError("http", f"{where}: HTTP {resp.status}: {body[:300].decode('utf-8', 'replace')}",
                               status=resp.status)
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise BackendError("protocol", f"{where}: not JSON: {body[:200]!r}", where="body",
                               detail=not_json(body.decode("utf-8", "replace"), exc)) from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def request_json(client: httpx.Client, method: str, path: str, *, json_body=None, params=None,
                 timeout: float = 15.0, allow_text: bool = False, headers: dict | None = None):
    """Send one request and return parsed JSON (or the text, when ``allow_text``)."""
    where = f"{method} {str(client.base_url).rstrip('/')}{path}"
    try:
        r = client.request(method, path, json=json_body, params=params, timeout=timeout, headers=headers)
    except httpx.TimeoutException as exc:
        raise BackendError("timeout", f"{where}: {exc}") from exc
    except httpx.TransportError as exc:
        raise BackendError("connection", f"{where}: {exc}") from exc
    if r.status_code >= 400:
        raise BackendError("http", f"{where}: HTTP {r.status_code}: {r.text[:300]}", status=r.status_code)
    try:
        return r.json()
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        if allow_text:
            return r.text
        raise BackendError("protocol", f"{where}: not JSON: {r.text[:200]!r}", where="body",
                           detail=not_json(r.text, exc)) from exc


def not_json(text: str, exc: BaseException) -> dict:
    """Where reading a body that is no JSON stopped, and what it held there.

    ``value`` is the text around the parser's stop (``at_char``, its
    ``reason``), ``key`` the last object key before it: an answer cut off in
    its content stops at the start of ``content``'s string. ``tail`` is how the
    body ends where that is not in ``value`` already (where it was cut).
    """
    pos = getattr(exc, "pos", None)
    at = pos if isinstance(pos, int) and 0 <= pos <= len(text) else 0
    around = text[max(0, at - 120):at + 40]
    out = {"value": ("…" if at > 120 else "") + around + ("…" if at + 40 < len(text) else ""),
           "reason": getattr(exc, "msg", None) or type(exc).__name__,
           "at_char": pos if isinstance(pos, int) else None, "length": len(text)}
    keys = _KEY.findall(text, max(0, at - 2000), at)
    if keys:
        out["key"] = keys[-1]
    if at + 40 < len(text):
        out["tail"] = ("…" if len(text) > 80 else "") + text[-80:]
    return out


_KEY = re.compile(r'"((?:[^"\\]|\\.){1,64})"\s*:')


@contextmanager
def answer_errors(timeout_s: float) -> Iterator[None]:
    """httpx's failures during a chat request as BackendErrors: ``timeout``, ``connection``, ``protocol``.

    A body that does not decode as its Content-Encoding says is a
    ``protocol`` error.
    """
    try:
        yield
    except httpx.TimeoutException as exc:
        raise BackendError("timeout", f"no answer within {timeout_s:.0f} s: {exc}") from exc
    except httpx.TransportError as exc:
        raise BackendError("connection", f"{type(exc).__name__}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise BackendError("protocol", f"{type(exc).__name__}: {exc}") from exc


def check_stream_status(response: httpx.Response) -> None:
    """An error status on a streamed request, with the server's own words."""
    if response.status_code >= 400:
        text = response.read().decode("utf-8", "replace")
        raise BackendError("http", f"HTTP {response.status_code}: {text[:500]}", status=response.status_code)


#: An SSE line ends at CR, LF or CRLF and nowhere else (HTML spec, "Server-sent events").
_BREAK = re.compile(r"\r\n|\r|\n")
#: Longest line kept in memory: a server that never ends a line cannot fill it.
MAX_LINE_CHARS = 16 << 20


def split_lines(chunks: Iterable[bytes], *, max_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a byte stream, broken only at CR, LF or CRLF (Ollama's newline-delimited JSON).

    Kept by hand: httpx-sse splits lines this way only inside its event
    reader, and no maintained NDJSON reader for httpx streams exists here.

    ``httpx.Response.iter_lines`` (via ``str.splitlines``) also breaks at
    U+2028, U+2029, U+0085 and other characters a server may leave unescaped
    inside a JSON string, which cut one chunk into two unreadable halves.
    UTF-8 is decoded incrementally, so a character split across network
    chunks stays whole; invalid bytes become U+FFFD.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []  # pieces of the line not yet ended
    size = 0
    after_cr = False  # the last chunk ended in CR: an LF opening the next one belongs to it
    for chunk in chunks:
        text = decoder.decode(chunk)
        if after_cr and text[:1] == "\n":
            text = text[1:]
        if not text:
            continue
        after_cr = text[-1] == "\r"
        parts = _BREAK.split(text) if "\r" in text else text.split("\n")
        if len(parts) > 1:
            pending.append(parts[0])
            yield "".join(pending)
            yield from parts[1:-1]
            pending, size = [], 0
        if parts[-1]:
            pending.append(parts[-1])
            size += len(parts[-1])
            if size > max_chars:
                raise BackendError("protocol", f"stream line longer than {max_chars} characters")
    pending.append(decoder.decode(b"", final=True))
    last = "".join(pending)
    if last:
        yield last


#: Longest event (all its lines) kept in memory: a server that never ends one cannot fill it.
MAX_EVENT_CHARS = MAX_LINE_CHARS
#: Two line breaks in a row (CR, LF or CRLF each): the empty line that ends an event.
_EVENT_END = re.compile(r"\n[\r\n]|\r\r|\r\n[\r\n]")


class _BoundedText:
    """The response as httpx-sse's EventSource reads it (headers, ``iter_text``), within a budget.

    httpx-sse holds a line, and an event's lines, until they end: a server
    that never sends a line break or an empty line would fill memory, so the
    text it is fed is counted since the last event end and refused past
    ``max_chars``. At the end of the stream an empty line is added: an event
    left open then is still delivered (the library would drop it), so a
    server that omits the last empty line loses nothing.
    """

    def __init__(self, response: httpx.Response, max_chars: int):
        self.response, self.headers, self.max_chars = response, response.headers, max_chars

    def iter_text(self) -> Iterator[str]:
        pending = 0  # characters since the last empty line
        tail = ""  # the end of the previous piece: an event end may be cut across two
        for text in self.response.iter_text():
            window = tail + text
            ends = [m.end() for m in _EVENT_END.finditer(window)]
            pending = len(window) - ends[-1] if ends else pending + len(text)
            if pending > self.max_chars:
                raise BackendError("protocol", f"stream event longer than {self.max_chars} characters")
            tail = window[-3:]
            yield text
        yield "\n\n"


def sse_payloads(response: httpx.Response, *, max_chars: int = MAX_EVENT_CHARS) -> Iterator[str]:
    """The data of each server-sent event, read by httpx-sse (data lines of one event joined by LF).

    Lines break only at CR, LF or CRLF (not at U+2028 and the other
    separators ``str.splitlines`` knows). An event without data (httpx-sse
    also yields one for an empty line after an ``id:``) carries no chunk and
    is skipped. A content type other than ``text/event-stream`` is a
    protocol error naming it.
    """
    try:
        for event in EventSource(_BoundedText(response, max_chars)).iter_sse():
            if event.data:
                yield event.data
    except SSEError as exc:
        raise BackendError("protocol", f"not an event stream: {exc}") from exc


def sse_chunks(response: httpx.Response) -> Iterator[dict]:
    """The JSON chunks of an OpenAI-style event stream, up to ``[DONE]``.

    An unreadable chunk, or one that is not a JSON object, is a protocol
    error and an ``error`` chunk an HTTP error, both with the server's text:
    never a silently shorter answer. A server that answers a streamed request
    with one plain JSON body (``application/json``) gives that body as the
    only chunk.
    """
    ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if ctype == "application/json":
        payloads: Iterable[str] = [response.read().decode("utf-8", "replace")]
    else:
        payloads = sse_payloads(response)
    for payload in payloads:
        objects, done = _event_objects(payload.strip())
        for chunk in objects:
            if not isinstance(chunk, dict):
                raise malformed("stream chunk", "not an object", chunk)
            if "error" in chunk:
                raise BackendError("http", f"error in stream: {json.dumps(chunk['error'], ensure_ascii=False)[:500]}")
            yield chunk
        if done:
            return


def _event_objects(payload: str) -> tuple[list, bool]:
    """The JSON values of one event's data, and whether ``[DONE]`` ended the stream.

    A server that wrote one complete object per ``data:`` line without the
    empty line between events gives one value per line.
    """
    if payload == "[DONE]":
        return [], True
    try:
        return [json.loads(payload)], False
    except (ValueError, RecursionError) as exc:
        error = exc
    if "\n" in payload:
        out = []
        try:
            for line in filter(None, (x.strip() for x in payload.split("\n"))):
                if line == "[DONE]":
                    return out, True
                out.append(json.loads(line))
            return out, False
        except (ValueError, RecursionError):
            pass
    raise BackendError("protocol", f"unreadable stream chunk: {payload[:200]!r}") from error


def json_lines(response: httpx.Response) -> Iterator[dict]:
    """The objects of a newline-delimited JSON stream (Ollama), split as :func:`split_lines` does."""
    for line in split_lines(response.iter_bytes()):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise BackendError("protocol", f"unreadable stream line: {line[:200]!r}") from exc
        if not isinstance(obj, dict):
            raise malformed("stream line", "not an object", obj)
        yield obj


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> ``{sample name without prefix: value}`` (labels kept in the name).

    ``llamacpp:tokens_predicted_total`` becomes ``tokens_predicted_total``;
    a labelled sample ``name{a="b"}``. A sample's timestamp is not its value.
    NaN and infinite values are left out (no counter to subtract). The
    library refuses a whole text for one bad line, so a text it refuses is
    read again line by line and only the unreadable lines are left out.
    """
    try:
        return _samples(text_string_to_metric_families(text))
    except ValueError:
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                try:
                    out.update(_samples(text_string_to_metric_families(line + "\n")))
                except ValueError:
                    continue  # a line that is no sample: skipped, as a malformed line is everywhere
        return out


def _samples(families) -> dict[str, float]:
    out = {}
    for family in families:
        for sample in family.samples:
            if not math.isfinite(sample.value):
                continue
            labels = ",".join(f'{k}="{_label_text(v)}"' for k, v in sample.labels.items())
            out[sample.name.split(":", 1)[-1] + (f"{{{labels}}}" if labels else "")] = float(sample.value)
    return out


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


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

    Not a measurement: no counters are read. Ollama, llama-swap, generic
    servers and llama-server all answer this OpenAI-compatible path, so a
    probe written for one runs against the others unchanged. A fresh
    connection per request, as for measured ones: llama-server's router
    sometimes drops a kept-alive connection between requests, which would be
    a false "server disconnected" error.
    """
    data = request_json(client, "POST", "/v1/chat/completions", json_body=body | {"model": model, "stream": False},
                        timeout=timeout_s, headers={"Connection": "close"})
    if not isinstance(data, dict) or "error" in data:
        shown = data.get("error") if isinstance(data, dict) else data
        raise BackendError("http", f"error in answer: {str(data)[:500]}", where="error" if isinstance(data, dict)
                           else "body", detail={"value": str(shown)[:300]})
    return data
