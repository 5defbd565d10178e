"""A fake OpenAI-compatible server on 127.0.0.1 that answers what a test scripts, byte for byte.

For hostile and malformed answers no real server gives on purpose: values
of the wrong kind, huge numbers, unescaped line separators, JSON bodies to
streamed requests, answers cut into one-byte writes. Each POST to
``/v1/chat/completions`` takes the next scripted answer; ``/models``,
``/v1/models`` and ``/props`` answer what the test sets.

Answers are built from JSON text with ``RAW`` markers, so a value that
Python's json module cannot write (``1e999``, a 400-digit integer) goes out
exactly as typed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_TIMINGS = {"prompt_n": 12, "prompt_ms": 10.0, "prompt_per_second": 1200.0, "predicted_n": 3,
                "predicted_ms": 30.0, "predicted_per_second": 100.0, "cache_n": 0}
GOOD_USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def raw_json(obj, raw: dict[str, str] | None = None) -> str:
    """``json.dumps(obj)`` with each string ``"RAW:<key>"`` replaced by ``raw[key]`` as typed."""
    text = json.dumps(obj, ensure_ascii=False)
    for key, value in (raw or {}).items():
        text = text.replace(json.dumps(f"RAW:{key}"), value)
    return text


@dataclass
class Answer:
    """One scripted answer: ``body`` bytes sent as ``ctype``, in writes of ``piece`` bytes (0: at once)."""

    body: bytes
    ctype: str = "text/event-stream"
    piece: int = 0
    status: int = 200


def sse(*events: str, done: bool = True, eol: str = "\n") -> bytes:
    """Events as ``data: <text>`` blocks, then ``[DONE]``; ``eol`` is the line ending used."""
    out = "".join(f"data: {e}{eol}{eol}" for e in events)
    if done:
        out += f"data: [DONE]{eol}{eol}"
    return out.encode("utf-8")


def llama_stream(content="hi there", *, timings=None, usage=None, raw=None, finish="stop", delta=None,
                 choices=None, eol="\n", piece=0) -> Answer:
    """A llama-server-shaped stream: text chunks, a final chunk with ``timings``, a usage chunk."""
    first = {"choices": choices if choices is not None else
             [{"index": 0, "delta": delta if delta is not None else {"content": content}, "finish_reason": None}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "timings": GOOD_TIMINGS if timings is None else timings}
    events = [raw_json(first, raw), raw_json(last, raw)]
    if usage is not None:
        events.append(raw_json({"choices": [], "usage": usage}, raw))
    return Answer(sse(*events, eol=eol), piece=piece)


def openai_stream(content="hi there", *, usage=None, raw=None, finish="stop", delta=None, piece=0) -> Answer:
    """An OpenAI-shaped stream without timings: one chunk per word, then ``usage``."""
    words = content.split(" ") if content else []
    events = [raw_json({"choices": [{"index": 0, "delta": delta if delta is not None else
                                     {"content": w if i == 0 else " " + w}, "finish_reason": None}]}, raw)
              for i, w in enumerate(words or [""])]
    events.append(raw_json({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}, raw))
    events.append(raw_json({"choices": [], "usage": GOOD_USAGE if usage is None else usage}, raw))
    return Answer(sse(*events), piece=piece)


def whole(message=None, *, timings=None, usage=None, raw=None, finish="stop") -> Answer:
    """A non-streamed answer (``application/json``) to a streamed request."""
    body = {"choices": [{"index": 0, "message": message if message is not None else
                         {"role": "assistant", "content": "hi there"}, "finish_reason": finish}]}
    if timings is not None:
        body["timings"] = timings
    if usage is not None:
        body["usage"] = usage
    return Answer(raw_json(body, raw).encode(), ctype="application/json")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, answer: Answer) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.ctype)
        self.send_header("Connection", "close")
        if not answer.piece:
            self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        step = answer.piece or len(answer.body) or 1
        for i in range(0, len(answer.body), step):
            self.wfile.write(answer.body[i:i + step])
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        app = self.server.app
        path = self.path.split("?")[0]
        if path in ("/models", "/v1/models"):
            self._send(Answer(app.models_body, ctype="application/json"))
        elif path == "/props":
            self._send(Answer(app.props_body, ctype="application/json"))
        else:
            self._send(Answer(b'{"error": "not found"}', ctype="application/json", status=404))

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        app = self.server.app
        if self.path.split("?")[0] != "/v1/chat/completions":
            self._send(Answer(b'{"error": "not found"}', ctype="application/json", status=404))
            return
        with app.lock:
            answer = app.answers.pop(0) if app.answers else Answer(b'{"error": "no answer scripted"}',
                                                                   ctype="application/json", status=500)
            app.served += 1
        self._send(answer)


@dataclass
class FakeServer:
    answers: list[Answer]
    models_body: bytes = b'{"object": "list", "data": [{"id": "fake-model", "object": "model"}]}'
    props_body: bytes = b'{"build_info": "fake-1"}'
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> "FakeServer":
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.app = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"


def campaign(url: str, backend: str, reps: int, model: str = "fake-model") -> str:
    return f"""
[campaign]
name = "malformed-{backend}"
prompt_classes = ["short"]
repetitions = {reps}
max_tokens = 8
[server]
backend = "{backend}"
url = "{url}"
request_timeout_s = 20
[[models]]
name = "{model}"
"""
