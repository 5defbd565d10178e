"""The backends' HTTP client never sends a request on a kept-alive connection.

llama-server's router (cpp-httplib) sometimes drops a kept-alive connection
just as the next request goes out on it; httpx then reports "Server
disconnected without sending a response", which cardproof would store as a
connection error on a sample or a probe. The server below answers the first
request of each connection and drops the connection, unanswered, on any
second one: a client that reuses connections fails on its second request.
"""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from cardproof.daemon.backends.base import BackendError
from cardproof.daemon.backends.http import make_client, request_json

_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\": 1}\r\n"


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    return True


@pytest.fixture
def one_answer_per_connection():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()
    counts = {"connections": 0, "dropped": 0}

    def serve(conn: socket.socket) -> None:
        with conn:
            if not _read_request(conn):
                return
            conn.sendall(_ANSWER)  # no "Connection: close": the client may keep it
            if _read_request(conn):  # a second request on this connection: dropped unanswered
                counts["dropped"] += 1

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            counts["connections"] += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}", counts
    stop.set()
    t.join(2)
    srv.close()


def test_the_server_really_drops_a_reused_connection(one_answer_per_connection):
    """The control: a plain kept-alive httpx client fails on its second request against this server."""
    url, counts = one_answer_per_connection
    with httpx.Client(base_url=url, timeout=5) as client:
        assert client.get("/a").json() == {"ok": 1}
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/b")
    assert counts["dropped"] == 1


def test_backend_client_opens_a_fresh_connection_per_request(one_answer_per_connection):
    url, counts = one_answer_per_connection
    client = make_client(url, 5.0)
    try:
        for path in ("/props", "/models", "/v1/chat/completions", "/metrics"):
            try:
                assert request_json(client, "GET", path) == {"ok": 1}
            except BackendError as exc:  # pragma: no cover - the failure this test exists for
                pytest.fail(f"{path}: {exc}")
    finally:
        client.close()
    assert counts["dropped"] == 0 and counts["connections"] == 4
