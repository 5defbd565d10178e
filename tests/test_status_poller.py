"""The status poller: the router's model status asked before each measured request.

The first tests talk to the session's real router-mode llama-server; the
others to small real HTTP servers of the standard library, which can do
what llama-server does only sometimes (close an idle kept-alive connection)
or never (answer 500, answer text, demand a login).
"""

from __future__ import annotations

import base64
import http.server
import socket
import threading

import httpx
import pytest

from cardproof.daemon.backends import BackendError
from cardproof.daemon.backends.http import StatusPoller, tls_verify
from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from conftest import unload_all, wait_states


def test_the_poller_reads_the_routers_models_as_httpx_does_on_one_connection(llama_server):
    poller = StatusPoller(llama_server.url)
    try:
        first = poller.get_json("/models")
        conn = poller._conn
        second = poller.get_json("/models")
        assert poller._conn is conn, "the kept-alive connection was not reused"
    finally:
        poller.close()
    direct = httpx.get(llama_server.url + "/models", timeout=10).json()
    assert [m["id"] for m in first["data"]] == [m["id"] for m in direct["data"]]
    assert [m["id"] for m in second["data"]] == [m["id"] for m in direct["data"]]


def test_the_load_watcher_sees_an_unloaded_model_as_a_load_and_a_loaded_one_as_ready(llama_server):
    unload_all(llama_server.url)
    backend = LlamaServerBackend(llama_server.url, timeout_s=60)
    try:
        watch = backend.watch_load("tiny-a")
        assert watch.load_seen, "an unloaded model must read as a load in this request"
        httpx.post(llama_server.url + "/models/load", json={"model": "tiny-a"}, timeout=60)
        wait_states(llama_server.url, lambda st: st.get("tiny-a") == "loaded")
        watch.stop(settle_s=5.0)
        assert watch.load_seconds is not None and watch.ready_at is not None
        again = backend.watch_load("tiny-a")
        assert not again.load_seen, "a loaded model read as a load"
    finally:
        backend.close()
        unload_all(llama_server.url)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless told otherwise
    seen: list = []
    mode = "json"

    def do_GET(self):  # noqa: N802 (the standard library's name)
        type(self).seen.append((self.path, self.headers.get("Authorization"), self.client_address[1]))
        body, status = b'{"data": [{"id": "m", "status": {"value": "loaded"}}]}', 200
        if self.mode == "error":
            body, status = b"model router crashed", 500
        elif self.mode == "text":
            body = b"<html>not json</html>"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.mode == "drop":  # close the kept-alive connection without saying so
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def small_server():
    handler = type("H", (_Handler,), {"seen": [], "mode": "json"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


def test_a_connection_the_server_closed_meanwhile_is_asked_again_on_a_new_one(small_server):
    server, handler = small_server
    handler.mode = "drop"
    poller = StatusPoller(f"http://127.0.0.1:{server.server_port}/")
    try:
        for _ in range(3):  # each poll after the first meets a connection the server has closed
            assert poller.get_json("/models")["data"][0]["id"] == "m"
    finally:
        poller.close()
    assert len(handler.seen) == 3
    assert len({port for _, _, port in handler.seen}) == 3, "each poll needed a connection of its own"


def test_an_error_status_a_text_answer_and_a_dead_server_are_backend_errors(small_server):
    server, handler = small_server
    poller = StatusPoller(f"http://127.0.0.1:{server.server_port}")
    handler.mode = "error"
    with pytest.raises(BackendError) as err:
        poller.get_json("/models")
    assert err.value.kind == "http" and err.value.status == 500 and "model router crashed" in err.value.text
    handler.mode = "text"
    with pytest.raises(BackendError) as err:
        poller.get_json("/models")
    assert err.value.kind == "protocol" and "not JSON" in err.value.text
    poller.close()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with pytest.raises(BackendError) as err:
        StatusPoller(f"http://127.0.0.1:{dead}").get_json("/models")
    assert err.value.kind == "connection" and f"127.0.0.1:{dead}/models" in err.value.text


def test_the_login_of_the_url_or_the_backends_bearer_token_goes_with_each_poll(small_server):
    server, handler = small_server
    StatusPoller(f"http://user:p%40ss@127.0.0.1:{server.server_port}/api").get_json("/models")
    StatusPoller(f"http://127.0.0.1:{server.server_port}", headers={"authorization": "Bearer t0k"}).get_json("/x")
    (path1, auth1, _), (path2, auth2, _) = handler.seen
    assert path1 == "/api/models" and path2 == "/x"
    assert auth1 == "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert auth2 == "Bearer t0k"


def test_plain_http_clients_skip_the_certificate_store_and_https_ones_share_one():
    assert tls_verify("http://127.0.0.1:8080") is False
    first, second = tls_verify("https://example.invalid"), tls_verify("https://other.invalid:8443")
    assert first is second and first.verify_mode.name == "CERT_REQUIRED"
