"""llama-swap backend against RECORDED responses in the shapes of llama-swap's source, over loopback.

No llama-swap binary is installed here; see tests/fixtures/llamaswap/README.md.
The chat stream is a real llama-server stream, passed through as llama-swap
passes it, so its ``timings`` are the upstream's own counters.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.backends import BackendError, make_backend
from cardproof.daemon.backends.llamaswap import LlamaSwapBackend
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from recorded_servers import RecordedLlamaSwap


def test_recorded_stream_keeps_the_upstream_timings():
    with RecordedLlamaSwap() as srv:
        b = make_backend("llama-swap", srv.url, 10)
        res = b.chat("qwen", "Request abc. Hello", max_tokens=8, reasoning=False)
        body = next(body for m, p, body, _ in srv.requests if p == "/v1/chat/completions")
        b.close()
    # recorded llama-server timings: predicted_n 8 in 1307.509 ms
    assert res.counter_source == "timings"
    assert res.generated_tokens == 8 and res.decode_tps == pytest.approx(5.353691638069031)
    assert res.prompt_tokens == 67 and res.cached_tokens == 0
    assert res.draft_tokens == 15 and res.draft_accepted == 0
    assert res.stop_reason == "length"
    assert res.response["wall_clock"]["generated_tokens"] == 8  # kept beside, never instead
    assert body["model"] == "qwen" and body["cache_prompt"] is False


def test_recorded_running_states_loads_and_watcher():
    with RecordedLlamaSwap() as srv:
        b = LlamaSwapBackend(srv.url, timeout_s=10)
        assert b.is_router() and b.model_status("qwen") == "unloaded"
        watcher = b.watch_load("qwen")
        assert watcher.load_seen
        b.chat("qwen", "x", max_tokens=4, reasoning=False)
        watcher.stop(settle_s=2.0)
        assert watcher.load_seconds is not None and b.model_status("qwen") == "loaded"
        res = b.load("gemma")
        assert res.status == "loaded" and res.load_seconds is not None
        assert b.load("gemma").status == "already_loaded"
        b.close()


def test_recorded_upstream_metrics_and_props_only_for_a_running_model():
    with RecordedLlamaSwap() as srv:
        b = LlamaSwapBackend(srv.url, timeout_s=10)
        with pytest.raises(BackendError) as exc:
            b.metrics("qwen")  # not running: reading it must not start it
        assert exc.value.status == 409 and srv.states == {}
        b.load("qwen")
        assert b.metrics("qwen")["tokens_predicted_total"] == 42
        info = b.server_info("qwen")
        assert info["build_info"] == "b0-unknown" and info["eos_token"] == "</s>"
        assert info["running"] == [{"model": "qwen", "state": "ready"}]
        b.close()


def test_recorded_unload_one_model_and_never_all_when_others_run():
    with RecordedLlamaSwap() as srv:
        b = LlamaSwapBackend(srv.url, timeout_s=10)
        b.load("qwen")
        b.unload("qwen")
        assert b.model_status("qwen") == "unloaded"
        b.close()
    with RecordedLlamaSwap(per_model_unload=False) as old:
        b = LlamaSwapBackend(old.url, timeout_s=10)
        old.states.update({"qwen": "ready", "gemma": "ready"})
        with pytest.raises(BackendError) as exc:
            b.unload("qwen")  # only GET /unload exists, and it would stop gemma too
        assert "gemma" in exc.value.text and old.states == {"qwen": "ready", "gemma": "ready"}
        del old.states["gemma"]
        b.unload("qwen")
        assert old.states == {}
        b.close()


def test_recorded_campaign_runs_through_llama_swap(tmp_path):
    with RecordedLlamaSwap() as srv:
        text = f"""
[campaign]
name = "swap"
prompt_classes = ["short"]
repetitions = 2
max_tokens = 8
[server]
backend = "llama-swap"
url = "{srv.url}"
[[models]]
name = "qwen"
[[models]]
name = "gemma"
"""
        store = open_store(tmp_path / "s.db")
        out = run_campaign(store, parse_campaign(text), echo=lambda s: None)
    assert out.status == "completed" and out.measured == 4
    loads = store.db.execute("select count(*) from loads where run_id = ? and status = 'loaded'", [out.run_id]).fetchone()
    assert loads[0] == 2
    assert {r[0] for r in store.db.execute("select counter_source from samples")} == {"timings"}
    store.close()
