"""Loopback HTTP servers that replay recorded Ollama and llama-swap responses.

The responses come from the files in tests/fixtures/ollama and
tests/fixtures/llamaswap (sources in their README). The servers keep just
enough state (which models are loaded) to replay them in the order a real
server would; the backends talk to them over a real socket.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def recorded(kind: str, name: str):
    text = (FIXTURES / kind / name).read_text()
    return json.loads(text) if name.endswith(".json") else text


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def _send(self, status: int, payload, ctype="application/json"):
        data = payload if isinstance(payload, bytes) else (
            json.dumps(payload).encode() if ctype == "application/json" else str(payload).encode())
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, parts: list[bytes], ctype: str, delay_s: float = 0.0):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Connection", "close")
        self.end_headers()
        for p in parts:
            self.wfile.write(p)
            self.wfile.flush()
            if delay_s:
                time.sleep(delay_s)
        self.close_connection = True

    def do_GET(self):
        self.server.app.handle(self, "GET", None)

    def do_POST(self):
        self.server.app.handle(self, "POST", self._body())


class RecordedServer:
    """Start on 127.0.0.1:0; ``url``; ``requests`` lists (method, path, body, client address)."""

    def __init__(self):
        self.requests: list[tuple] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.app = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, h: _Handler, method: str, body):
        self.requests.append((method, h.path, body, h.client_address[0]))
        self.route(h, method, h.path, body)


class RecordedOllama(RecordedServer):
    """``/api/*`` of Ollama; ``loaded`` is the set of models ``/api/ps`` lists."""

    def __init__(self, *, thinking_models=(), chunk_delay_s: float = 0.0, vram_share: float | None = None,
                 log_path: Path | None = None, load_lines=(), chat_lines=(), shows: dict | None = None):
        super().__init__()
        self.shows = dict(shows or {})  # model -> its /api/show answer, in place of the recorded one
        # a stand-in for Ollama's journal: each load appends these lines (recorded formats)
        self.log_path = log_path
        self.load_lines = list(load_lines)
        self.chat_lines = list(chat_lines)  # appended after each /api/chat (the runner's task lines)
        self.loaded: set[str] = set()
        self.thinking_models = set(thinking_models)
        self.chunk_delay_s = chunk_delay_s
        self.vram_share = vram_share
        self.v1_requests: list[dict] = []

    def _ps(self):
        template = recorded("ollama", "ps.json")["models"][0]
        out = []
        for name in sorted(self.loaded):
            e = copy.deepcopy(template) | {"name": name, "model": name}
            if self.vram_share is not None:
                e["size_vram"] = int(e["size"] * self.vram_share)
            out.append(e)
        return {"models": out}

    def _log_load(self, model: str) -> None:
        if self.log_path is not None and model not in self.loaded:
            with open(self.log_path, "a") as f:
                f.write("".join(line + "\n" for line in self.load_lines))

    def route(self, h, method, path, body):
        if path == "/api/version":
            return h._send(200, recorded("ollama", "version.json"))
        if path == "/api/tags":
            return h._send(200, recorded("ollama", "tags.json"))
        if path == "/api/ps":
            return h._send(200, self._ps())
        if path == "/api/show" and body.get("model") in self.shows:
            return h._send(200, self.shows[body["model"]])
        if path == "/api/show":
            name = "show_thinking.json" if body.get("model") in self.thinking_models else "show.json"
            return h._send(200, recorded("ollama", name))
        if path == "/api/generate":
            model = body["model"]
            if body.get("keep_alive") == 0:
                self.loaded.discard(model)
                return h._send(200, recorded("ollama", "generate_unload.json") | {"model": model})
            self._log_load(model)
            self.loaded.add(model)
            return h._send(200, recorded("ollama", "generate_load.json") | {"model": model})
        if path == "/v1/chat/completions":
            # probes speak OpenAI to Ollama: a get_weather offer gets the recorded call, the tool's
            # result gets the recorded answer, anything else a plain answer without a call
            msgs = body.get("messages") or []
            offered = {t["function"]["name"] for t in body.get("tools") or []}
            name = "v1_chat_tool_call.json" if "get_weather" in offered and msgs[-1]["role"] == "user" \
                else "v1_chat_answer.json"
            self.v1_requests.append(body)
            return h._send(200, recorded("ollama", name) | {"model": body["model"]})
        if path == "/api/chat":
            model = body["model"]
            if body.get("think") and model not in self.thinking_models:
                return h._send(400, {"error": f'"{model}" does not support thinking'})
            final = recorded("ollama", "chat_final.json" if model in self.loaded else "chat_final_load.json")
            self._log_load(model)
            self.loaded.add(model)
            if self.log_path is not None and self.chat_lines:
                with open(self.log_path, "a") as f:
                    f.write("".join(line + "\n" for line in self.chat_lines))
            chunks = []
            if body.get("think"):
                chunks.append(recorded("ollama", "thinking_chunk.json") | {"model": model})
            chunk = recorded("ollama", "chat_chunk.json") | {"model": model}
            chunks += [chunk, chunk]
            chunks.append(final | {"model": model})
            return h._stream([json.dumps(c).encode() + b"\n" for c in chunks], "application/x-ndjson",
                             self.chunk_delay_s)
        h._send(404, {"error": "not found"})


class RecordedLlamaSwap(RecordedServer):
    """``/running``, ``/unload``, ``/upstream/{model}/...`` and ``/v1/*`` of llama-swap."""

    def __init__(self, models=("qwen", "gemma"), *, per_model_unload: bool = True):
        super().__init__()
        self.models = list(models)
        self.states: dict[str, str] = {}
        self.per_model_unload = per_model_unload

    def route(self, h, method, path, body):
        if path == "/running":
            return h._send(200, {"running": [{"model": m, "state": s} for m, s in self.states.items()]})
        if path == "/unload":
            self.states.clear()
            return h._send(200, "OK", "text/plain")
        if path.startswith("/api/models/unload/") and self.per_model_unload:
            self.states.pop(path.rsplit("/", 1)[-1], None)
            return h._send(200, "OK", "text/plain")
        if path == "/v1/models":
            return h._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})
        if path.startswith("/upstream/"):
            model, _, rest = path[len("/upstream/"):].partition("/")
            self.states[model] = "ready"  # an upstream request starts the model
            if rest == "health":
                return h._send(200, {"status": "ok"})
            if rest == "metrics":
                return h._send(200, "llamacpp:tokens_predicted_total 42\n", "text/plain")
            if rest == "props":
                return h._send(200, {"build_info": "b0-unknown", "eos_token": "</s>"})
            return h._send(404, {"error": "not found"})
        if path == "/v1/chat/completions":
            # a swap: the other models stop, the requested one starts (swap: true group)
            self.states = {body["model"]: "ready"}
            raw = recorded("llamaswap", "chat_stream.sse").replace('"model":"tiny-a"', f'"model":"{body["model"]}"')
            return h._stream([p.encode() + b"\n\n" for p in raw.strip().split("\n\n")], "text/event-stream")
        h._send(404, {"error": "not found"})
