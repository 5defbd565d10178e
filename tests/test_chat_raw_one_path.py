"""One chat_raw for every backend, llama-server's included (it was a twin that differed).

The hostile answers come from the fake server on 127.0.0.1 (tests/malformed_server.py):
no real server sends them on purpose. A real llama-server answers the good case.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.backends import BackendError, make_backend
from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from malformed_server import Answer, FakeServer

JSON = "application/json"
CASES = [
    ("refused", Answer(b'{"error": {"message": "image input is not supported"}}', ctype=JSON, status=400),
     ("http", 400)),
    ("server error", Answer(b"boom", ctype="text/plain", status=500), ("http", 500)),
    ("not JSON", Answer(b"<html>hi</html>", ctype="text/html"), ("protocol", None)),
    ("nested too deep", Answer(b"[" * 100_000 + b"]" * 100_000, ctype=JSON), ("protocol", None)),
    ("error object", Answer(b'{"error": "overloaded"}', ctype=JSON), ("http", None)),
    ("not an object", Answer(b"[1, 2]", ctype=JSON), ("http", None)),
]


def test_llama_server_has_no_chat_raw_of_its_own():
    assert "chat_raw" not in vars(LlamaServerBackend)


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
@pytest.mark.parametrize("label,answer,expected", CASES, ids=[c[0] for c in CASES])
def test_every_backend_turns_a_bad_probe_answer_into_the_same_backend_error(kind, label, answer, expected):
    with FakeServer([answer]) as server:
        backend = make_backend(kind, server.url, 10)
        try:
            with pytest.raises(BackendError) as err:
                backend.chat_raw("fake-model", {"messages": [{"role": "user", "content": "hi"}]})
        finally:
            backend.close()
    assert (err.value.kind, err.value.status) == expected, str(err.value)
    assert "\n" not in str(err.value)[:600]


def test_a_real_llama_server_answers_chat_raw(llama_server):
    backend = make_backend("llama-server", llama_server.url, 60)
    try:
        data = backend.chat_raw("tiny-a", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    finally:
        backend.close()
    assert isinstance(data["choices"][0]["message"], dict)
