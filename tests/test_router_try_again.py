"""A router that says "model limit reached, try again later" is asked again, within the load's deadline.

llama-server's router (tools/server/server-models.cpp, ``server_models::load``)
evicts its least recently used model and then re-checks ``--models-max``
under a lock; a child that has not left the count yet makes it throw
``model limit reached, try again later``, which the HTTP layer returns as a
server error. No real router can be made to hit that window on demand, so a
loopback server replays it (the error body in llama-server's
``format_error_response`` shape) over a real socket.
"""

from __future__ import annotations

import time

from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from recorded_servers import RecordedServer

_LIMIT = {"error": {"code": 500, "message": "model limit reached, try again later", "type": "server_error"}}
_NOT_FOUND = {"error": {"code": 400, "message": "model name=tiny-z is not found", "type": "invalid_request_error"}}


class _Router(RecordedServer):
    """``/models`` and ``/models/load`` of a router-mode llama-server; the first ``busy`` loads get the limit error."""

    def __init__(self, busy: int, error=_LIMIT):
        super().__init__()
        self.busy, self.error, self.state = busy, error, "unloaded"

    def route(self, h, method, path, body):
        if path.startswith("/models/load"):
            if self.busy:
                self.busy -= 1
                return h._send(self.error["error"]["code"], self.error)
            self.state = "loaded"
            return h._send(200, {"success": True})
        if path.startswith("/models"):
            entry = {"id": "tiny-b", "object": "model", "status": {"value": self.state, "args": ["--port", "41234"]}}
            return h._send(200, {"object": "list", "data": [entry]})
        return h._send(404, {"error": {"code": 404, "message": "not found", "type": "not_found_error"}})


def _loads(server) -> int:
    return sum(1 for m, p, *_ in server.requests if m == "POST" and p.startswith("/models/load"))


def test_limit_reached_is_asked_again_and_the_load_is_measured():
    with _Router(busy=2) as server:
        res = LlamaServerBackend(server.url, timeout_s=10).load("tiny-b")
        assert res.status == "loaded", res
        assert _loads(server) == 3
        assert res.load_seconds is not None and res.load_seconds >= 0.5  # the two waits are part of the load


def test_limit_reached_until_the_deadline_fails_with_the_routers_words():
    with _Router(busy=10_000) as server:
        t0 = time.perf_counter()
        res = LlamaServerBackend(server.url, timeout_s=1.2).load("tiny-b")
        assert res.status == "failed" and "try again later" in res.error_text, res
        assert time.perf_counter() - t0 < 3.0 and _loads(server) >= 2


def test_any_other_refusal_fails_at_once():
    with _Router(busy=5, error=_NOT_FOUND) as server:
        res = LlamaServerBackend(server.url, timeout_s=10).load("tiny-b")
        assert res.status == "failed" and "is not found" in res.error_text and _loads(server) == 1
