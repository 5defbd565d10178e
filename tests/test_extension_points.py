"""The extension points are declared: backends, gates, migrations, commands.

Backend answers that no real server sends on purpose (a null ``timings``
after a real one, an empty ``usage``) come from the fake server on
127.0.0.1 in tests/malformed_server.py; everything else reads the real
registries and modules.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from cardproof.daemon import backends
from cardproof.daemon.backends import BACKENDS, Backend, BackendError, make_backend
from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from cardproof.daemon.backends.openai import OpenAICompatBackend
from cardproof.daemon.campaign import CampaignError, parse_campaign
from malformed_server import GOOD_TIMINGS, GOOD_USAGE, Answer, FakeServer, raw_json, sse

ROOT = Path(__file__).resolve().parents[1]


def _server(backend: str, extra: str = "") -> str:
    return f'[server]\nbackend = "{backend}"\nurl = "http://127.0.0.1:9"\n{extra}\n[[models]]\nname = "m"\n'


# -- backends -----------------------------------------------------------------

def test_every_registered_backend_is_a_complete_backend_under_its_own_kind():
    assert list(BACKENDS) == ["llama-server", "ollama", "llama-swap", "openai"]
    for kind, cls in BACKENDS.items():
        assert issubclass(cls, Backend) and cls.kind == kind
        assert not inspect.isabstract(cls), f"{kind} leaves {sorted(cls.__abstractmethods__)} undeclared"
        backend = make_backend(kind, "http://127.0.0.1:9", 5)
        try:
            # the optional capabilities answer the declared way instead of being absent
            for name in ("describe_model", "model_blob", "runner_arg"):
                assert callable(getattr(backend, name))
        finally:
            backend.close()


def test_an_incomplete_backend_cannot_be_made():
    class Half(Backend):
        kind = "half"

        def models(self):
            return []

    with pytest.raises(TypeError, match="abstract"):
        Half("http://127.0.0.1:9")


def test_campaign_validation_takes_backend_names_and_options_from_the_registry(monkeypatch):
    with pytest.raises(CampaignError) as err:
        parse_campaign(_server("vllm"))
    assert f"expected one of {', '.join(BACKENDS)}, got str 'vllm'" in str(err.value)
    with pytest.raises(CampaignError, match="expected one of .* got list"):
        parse_campaign(_server("llama-server").replace('"llama-server"', '["llama-server"]'))

    class Extra(OpenAICompatBackend):
        kind = "extra"
        options = ("api_key", "num_ctx")

    # a backend added to the registry is a valid name, and its options are accepted, with nothing else edited
    monkeypatch.setitem(BACKENDS, "extra", Extra)
    assert parse_campaign(_server("extra", "num_ctx = 4096")).num_ctx == 4096
    assert backends.taking("num_ctx") == ["ollama", "extra"]
    with pytest.raises(CampaignError, match="only the ollama and extra backend takes num_ctx"):
        parse_campaign(_server("openai", "num_ctx = 4096"))


def test_only_declared_options_reach_a_backend():
    ollama = make_backend("ollama", "http://127.0.0.1:9", 5, num_ctx=8192, api_key="k")
    server = make_backend("llama-server", "http://127.0.0.1:9", 5, num_ctx=8192, api_key="k")
    try:
        assert ollama.num_ctx == 8192 and "authorization" not in ollama.client.headers
        assert "authorization" not in server.client.headers
    finally:
        ollama.close()
        server.close()


def test_no_caller_probes_a_backend_for_attributes():
    """Runner, sampling, canaries, probes and cell checks use only the declared interface."""
    callers = [ROOT / "daemon" / n for n in ("runner.py", "run_finish.py", "sampling.py", "canaries.py",
                                              "cellchecks.py")]
    callers += sorted((ROOT / "daemon" / "probes").glob("*.py"))
    probing = re.compile(r"\b(hasattr|getattr)\(\s*(self\.)?backend\b")
    found = [f"{p.name}:{i}" for p in callers if p.exists()
             for i, line in enumerate(p.read_text().splitlines(), 1) if probing.search(line)]
    assert found == []


def test_llama_server_reads_its_stream_through_the_openai_backend():
    assert issubclass(LlamaServerBackend, OpenAICompatBackend)
    # one streaming loop: llama-server's chat has none of its own
    assert "client.stream(" not in inspect.getsource(LlamaServerBackend)


def _stream(*chunks: dict) -> Answer:
    first = {"choices": [{"index": 0, "delta": {"content": "hi there"}, "finish_reason": None}]}
    return Answer(sse(raw_json(first), *(raw_json(c) for c in chunks)))


END = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_a_null_timings_after_a_real_one(kind):
    """llama-server needs the stream's last timings (a null there is no counter: an error);
    a generic server keeps the last real one, as each did before they shared one loop."""
    answer = _stream(END | {"timings": GOOD_TIMINGS}, {"choices": [], "timings": None})
    with FakeServer([answer]) as srv:
        b = make_backend(kind, srv.url, 10)
        try:
            if kind == "llama-server":
                with pytest.raises(BackendError, match="stream ended without a timings object"):
                    b.chat("fake-model", "hello", max_tokens=8, reasoning=False)
            else:
                res = b.chat("fake-model", "hello", max_tokens=8, reasoning=False)
                assert (res.counter_source, res.decode_tps) == ("timings", 100.0)
        finally:
            b.close()


def test_llama_server_stores_its_response_as_before():
    """No client address or wall-clock block in a llama-server sample; an empty usage is not kept."""
    answer = _stream(END | {"timings": GOOD_TIMINGS}, {"choices": [], "usage": GOOD_USAGE}, {"choices": [], "usage": {}})
    with FakeServer([answer, answer]) as srv:
        server, generic = make_backend("llama-server", srv.url, 10), make_backend("openai", srv.url, 10)
        try:
            res = server.chat("fake-model", "hello", max_tokens=8, reasoning=False)
            other = generic.chat("fake-model", "hello", max_tokens=8, reasoning=False)
        finally:
            server.close()
            generic.close()
    assert sorted(res.response) == ["answer", "finish_reason", "reasoning", "timings", "usage"]
    assert res.response["usage"] == GOOD_USAGE and res.response["answer"] == "hi there"
    assert res.request["cache_prompt"] is False and res.request["prompt_chars"] == 5
    assert {"client_addr", "wall_clock"} <= set(other.response) and other.response["usage"] == {}
    assert json.loads(json.dumps(res.response)) == res.response
