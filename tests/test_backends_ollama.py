"""Ollama backend against RECORDED responses from Ollama's API docs, over a real loopback socket.

No Ollama binary can be installed here; tests/fixtures/ollama/README.md
names the source of every recorded response (docs/api.md,
docs/openapi.yaml, docs/capabilities/thinking.mdx in ollama/ollama).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardproof.daemon.backends import BackendError, backend_for, make_backend
from cardproof.daemon.backends.evidence import gpu_share, load_duration_seconds, record_runtime_selfreports
from cardproof.daemon.backends.ollama import OllamaBackend
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.run.judge import judge_run
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from recorded_servers import RecordedOllama


def _campaign(url: str, extra: str = "") -> str:
    return f"""
[campaign]
name = "ollama-recorded"
prompt_classes = ["short"]
repetitions = 2
max_tokens = 8

[server]
backend = "ollama"
url = "{url}"
request_timeout_s = 30
{extra}

[[models]]
name = "gemma4"
"""


def test_recorded_chat_counters_are_nanoseconds_turned_into_rates():
    with RecordedOllama() as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        b.load("gemma4")
        res = b.chat("gemma4", "Request abc. Hello", max_tokens=8, reasoning=False)
        b.close()
    # docs/openapi.yaml /api/chat example: eval_count 18 in 52479709 ns, prompt 11 in 13074791 ns
    assert res.counter_source == "ollama_counters"
    assert res.generated_tokens == 18 and res.prompt_tokens == 11
    assert res.decode_tps == pytest.approx(18 / 0.052479709)
    assert res.prefill_tps == pytest.approx(11 / 0.013074791)
    assert res.predicted_ms == pytest.approx(52.479709)
    assert res.stop_reason == "stop" and res.response["answer"] == "TheThe"
    assert res.ttft_ms is not None and res.wall_ms >= res.ttft_ms
    # /api/ps right after the answer: the runtime's own GPU share and effective context
    assert res.response["ps"]["context_length"] == 4096
    assert gpu_share(res.response) == pytest.approx(5333539264 / 6591830464)
    assert load_duration_seconds(res.response) == pytest.approx(0.101397084)
    assert res.response["client_addr"] == "127.0.0.1"


def test_recorded_request_sends_num_ctx_only_when_the_campaign_sets_it():
    with RecordedOllama() as srv:
        plain = OllamaBackend(srv.url, timeout_s=10)
        plain.chat("gemma4", "x", max_tokens=4, reasoning=False)
        sized = backend_for(parse_campaign(_campaign(srv.url, "num_ctx = 8192")))
        sized.chat("gemma4", "x", max_tokens=4, reasoning=False)
        chats = [b for m, p, b, _ in srv.requests if p == "/api/chat"]
        plain.close(), sized.close()
    assert chats[0]["options"] == {"num_predict": 4}
    assert chats[1]["options"] == {"num_predict": 4, "num_ctx": 8192}
    assert "think" not in chats[0]  # gemma4 declares no thinking capability (recorded /api/show)


def test_campaign_num_ctx_belongs_to_ollama_only():
    camp = parse_campaign(_campaign("http://127.0.0.1:11434", "num_ctx = 4096"))
    assert camp.backend == "ollama" and camp.num_ctx == 4096 and parse_campaign(_campaign("http://x")).num_ctx is None
    other = _campaign("http://127.0.0.1:8080", "num_ctx = 4096").replace('backend = "ollama"', 'backend = "openai"')
    with pytest.raises(CampaignError, match="server.num_ctx"):
        parse_campaign(other)


def test_recorded_thinking_model_gets_think_and_its_thinking_field_is_kept():
    with RecordedOllama(thinking_models={"gpt-oss"}) as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        on = b.chat("gpt-oss", "What is 17 x 23?", max_tokens=8, reasoning=True)
        off = b.chat("gpt-oss", "What is 17 x 23? again", max_tokens=8, reasoning=False)
        bodies = [body for m, p, body, _ in srv.requests if p == "/api/chat"]
        b.close()
    assert bodies[0]["think"] is True and bodies[1]["think"] is False
    assert on.response["reasoning"] == "17 times 23" and on.reasoning_chars == len("17 times 23")
    assert off.reasoning_chars == 0


def test_recorded_load_inside_request_is_timed_by_ollamas_load_duration():
    with RecordedOllama() as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        watcher = b.watch_load("gemma4")
        assert watcher.load_seen  # /api/ps did not list it before the request
        res = b.chat("gemma4", "x", max_tokens=4, reasoning=False)
        watcher.stop()
        b.close()
    # docs/api.md: load_duration 6338219291 ns
    assert watcher.load_seconds == pytest.approx(6.338219291)
    assert res.stop_reason == "length"


def test_recorded_unload_with_keep_alive_zero_is_verified_by_ps():
    with RecordedOllama() as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        first = b.load("gemma4")
        again = b.load("gemma4")
        assert first.status == "loaded" and again.status == "already_loaded"
        assert b.model_status("gemma4") == "loaded"
        b.unload("gemma4")
        assert b.model_status("gemma4") == "unloaded"
        sent = [body for m, p, body, _ in srv.requests if p == "/api/generate"]
        b.close()
    assert sent[-1] == {"model": "gemma4", "keep_alive": 0}


def test_recorded_show_version_and_metrics_not_supported():
    with RecordedOllama() as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        info = b.server_info("gemma4")
        row = b.describe_model("gemma4")
        with pytest.raises(BackendError) as exc:
            b.metrics("gemma4")
        b.close()
    assert info["version"] == "0.12.6" and info["capabilities"] == ["completion", "vision"]
    assert row["quantisation"] == "Q4_K_M" and row["architecture"] == "gemma4"
    assert row["digest_kind"] == "ollama-manifest" and row["file_bytes"] == 9608350245
    assert json.loads(row["capabilities_json"])["capabilities"] == ["completion", "vision"]
    assert exc.value.status == 501


def test_recorded_error_in_stream_is_an_exception_not_a_sample():
    with RecordedOllama() as srv:
        b = make_backend("ollama", srv.url, 10)
        with pytest.raises(BackendError) as exc:
            b.chat("gemma4", "x", max_tokens=4, reasoning=False, extra={"think": True})
        b.close()
    assert exc.value.kind == "http" and "does not support thinking" in exc.value.text


def test_recorded_campaign_runs_end_to_end_with_gates_fed_by_ollama_figures(tmp_path):
    """A whole campaign against the recorded server: loads, samples, /api/ps share, gates."""
    with RecordedOllama(vram_share=0.81) as srv:
        store = open_store(tmp_path / "o.db")
        out = run_campaign(store, parse_campaign(_campaign(srv.url)), echo=lambda s: None)
    assert out.status == "completed" and out.measured == 2
    samples = list(store.db.query("select * from samples where run_id = ?", [out.run_id]))
    assert {s["counter_source"] for s in samples} == {"ollama_counters"}
    fired = {(g["gate"], g["fired"]) for g in store.db.query("select gate, fired from gate_results")}
    assert ("not_on_card", 1) in fired  # runtime reports 81 % on the GPU
    model = store.db.execute("select quantisation, digest_kind from models where name = 'gemma4'").fetchone()
    assert model == ("Q4_K_M", "ollama-manifest")
    rep = store.db.execute("select kind, source, gpu_mib from memory_selfreports").fetchall()
    assert rep and rep[0][:2] == ("ps", "ollama /api/ps")
    assert record_runtime_selfreports(store, out.run_id) == 0  # once per load
    judge_run(store, out.run_id, parse_campaign(_campaign(srv.url)).gates)  # re-judging stays possible
    store.close()


def test_recorded_show_names_the_runner_whose_process_the_memory_capture_takes(tmp_path):
    """/api/show's modelfile (recorded, docs/api.md) names the blob; a real process with that blob on its
    command line stands in for the runner, and the load's memory is attributed to it by that argument."""
    import subprocess
    import sys

    digest = "200765e1283640ffbd013184bf496e261032fa75b99498a9613be4e94d63ad52"  # the FROM line of show.json
    blob = tmp_path / "blobs" / f"sha256-{digest}"
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "runner", "--model", str(blob),
                               "--port", "0"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "runner", "--model",
                              str(tmp_path / "blobs" / ("sha256-" + "0" * 64))])  # a neighbour's runner
    try:
        with RecordedOllama() as srv:
            b = OllamaBackend(srv.url, timeout_s=10)
            assert b.model_blob("gemma4").endswith(f"sha256:{digest}")
            assert b.runner_arg("gemma4") == f"sha256-{digest}"
            store = open_store(tmp_path / "o.db")
            out = run_campaign(store, parse_campaign(_campaign(srv.url)), echo=lambda s: None)
        rows = store.db.execute("select p.pid, p.how from memory_load_pids p join loads l on l.id = p.load_id "
                                "where l.run_id = ?", [out.run_id]).fetchall()
        assert rows and {pid for pid, _ in rows} == {runner.pid} and {how for _, how in rows} == {"arg"}
        store.close()
    finally:
        runner.kill()
        other.kill()


def test_recorded_tools_probe_runs_through_ollamas_openai_endpoint(tmp_path):
    """Probes reach Ollama through chat_raw (/v1/chat/completions); responses recorded in Ollama's shape."""
    with RecordedOllama() as srv:
        store = open_store(tmp_path / "o.db")
        campaign = parse_campaign(_campaign(srv.url) + '\n[probes]\nrun = ["tools"]\nrepeat = 1\n')
        out = run_campaign(store, campaign, echo=lambda s: None)
        sent = list(srv.v1_requests)
    got = {r["variant"]: (r["verdict"], r["raw_verdict"], r["arm"], r["declared"]) for r in store.db.query(
        "select * from probe_results where run_id = ? and probe = 'tools'", [out.run_id])}
    # the call parsed, the tool result went back, the answer used it
    assert got["weather"] == ("PASS", "PASS", "result_used", 0)
    # show.json declares completion and vision only: a missing call is "not capable", not a defect
    assert got["currency"] == ("NOT_CAPABLE", "FAIL", "no_tool_call", 0)
    assert got["pick_tool"][1:3] == ("FAIL", "wrong_tool")  # asked for the time, got the weather tool called
    assert all(b["model"] == "gemma4" and b["stream"] is False for b in sent)
    follow = next(b for b in sent if b["messages"][-1]["role"] == "tool")
    assert follow["messages"][-1]["tool_call_id"] == "call_ws2damtb"  # Ollama's call id carried into the follow-up
    store.close()


def test_recorded_ollama_log_loads_are_linked_to_the_runs_loads_by_the_blob(tmp_path):
    """Ollama's log names a model only by its blob; the run's load knows the blob from /api/show (recorded).

    The log lines are in the recorded formats of Ollama 0.12+ (see test_logs_attribution.py)."""
    digest = "200765e1283640ffbd013184bf496e261032fa75b99498a9613be4e94d63ad52"
    lines = [
        'time=2026-05-20T19:18:01.984Z level=INFO source=server.go:430 msg="starting runner" '
        f'cmd="/usr/local/bin/ollama runner --model /var/lib/ollama/blobs/sha256-{digest} --port 46001"',
        'time=2026-05-20T19:18:01.985Z level=INFO source=device.go:240 msg="model weights" device=CUDA0 size="1.5 GiB"',
        'time=2026-05-20T19:18:01.985Z level=INFO source=device.go:251 msg="kv cache" device=CUDA0 size="1.6 GiB"',
        'time=2026-05-20T19:18:01.985Z level=INFO source=device.go:262 msg="compute graph" device=CUDA0 size="252.2 MiB"',
        'time=2026-05-20T19:18:01.985Z level=INFO source=device.go:272 msg="total memory" size="3.4 GiB"',
        "load_tensors: offloaded 27/27 layers to GPU",
        "llama_context:      CUDA0 compute buffer size =   252.25 MiB",
        'time=2026-05-20T19:18:03.063Z level=INFO source=server.go:1388 msg="llama runner started in 1.08 seconds"',
        'time=2026-05-20T19:18:03.063Z level=INFO source=sched.go:561 msg="loaded runners" count=1',
    ]
    log = tmp_path / "ollama.log"
    log.write_text("")
    with RecordedOllama(log_path=log, load_lines=lines) as srv:
        store = open_store(tmp_path / "o.db")
        text = _campaign(srv.url).replace("request_timeout_s = 30", f'request_timeout_s = 30\nlog_file = "{log}"')
        out = run_campaign(store, parse_campaign(text), echo=lambda s: None)
    load = store.db.execute("select id, model_file from loads where run_id = ? and origin is null and status = 'loaded'",
                            [out.run_id]).fetchone()
    assert load and load[1].endswith(f"sha256:{digest}")  # the docs' spelling; the log has sha256-<hex>
    n_lines = store.db.execute("select count(*) from log_lines where load_id = ?", [load[0]]).fetchone()[0]
    assert n_lines == len(lines)  # every line of the runner's load now belongs to the run's load
    facts = dict(store.db.execute("select name, value_num from facts where load_id = ? and device is null",
                                  [load[0]]).fetchall())
    assert facts["offloaded_layers"] == 27 and facts["load_seconds"] == 1.08
    plan = store.db.execute("select gpu_mib, total_mib, line_ids_json from memory_selfreports "
                            "where load_id = ? and kind = 'plan'", [load[0]]).fetchone()
    assert plan[:2] == (round(1536 + 1638.4 + 252.2, 3), 3481.6)  # Ollama's plan: weights + KV + compute on CUDA0
    store.close()
    from cardproof.report.build import build

    build(tmp_path / "o.db", tmp_path / "site", run_mkdocs=False)
    en = (tmp_path / "site" / "site" / "runs" / f"run-{out.run_id}.md").read_text()
    de = (tmp_path / "site" / "site" / "runs" / f"run-{out.run_id}.de.md").read_text()
    first_plan_line = json.loads(plan[2])[0]
    # the plan links to its lines, which now live on the run's evidence page
    assert "Runtime's plan (GiB)" in en and f"(run-{out.run_id}-evidence.md#line-{first_plan_line})" in en
    evidence = (tmp_path / "site" / "site" / "runs" / f"run-{out.run_id}-evidence.md").read_text()
    assert f'<span id="line-{first_plan_line}"></span>' in evidence
    assert "Plan des Servers (GiB)" in de and "3,40" in de


#: /api/show's model_info of a dense model as docs/api.md prints it ("Show Model Information", llama3.2
#: example; tokenizer arrays come back empty without ``verbose``)
DOCS_MODEL_INFO = {
    "general.architecture": "llama", "general.file_type": 2, "general.parameter_count": 8030261248,
    "general.quantization_version": 2, "llama.block_count": 32, "llama.context_length": 8192,
    "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": [],
}


def _show(model_info: dict, modelfile: str = "") -> dict:
    base = json.loads((Path(__file__).parent / "fixtures" / "ollama" / "show.json").read_text())
    return base | {"model_info": model_info, "modelfile": modelfile}


def test_a_models_shape_from_show_model_info_when_the_blob_is_not_on_this_machine():
    """Recorded: docs/api.md's model_info (dense), and the same keys Ollama's converter writes for a mixture
    of experts (``<arch>.expert_count`` / ``expert_used_count``). The findings group models by this shape; a
    mixture of experts' active parameters are not in model_info and are not guessed, nor is a tokenizer hash."""
    moe = {"general.architecture": "qwen3moe", "general.parameter_count": 30532122624,
           "general.basename": "Qwen3", "qwen3moe.expert_count": 128, "qwen3moe.expert_used_count": 8}
    blob = "FROM /nowhere/.ollama/models/blobs/sha256-" + "ab" * 32 + "\n"
    with RecordedOllama(shows={"dense": _show(DOCS_MODEL_INFO, blob), "moe": _show(moe, blob)}) as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        dense, mixed = b.describe_model("dense"), b.describe_model("moe")
        b.close()
    assert dense["params"] == dense["active_params"] == 8030261248
    assert dense["expert_count"] == dense["expert_used_count"] == 0
    assert mixed["params"] == 30532122624 and mixed["basename"] == "Qwen3"
    assert (mixed["expert_count"], mixed["expert_used_count"]) == (128, 8)
    assert "active_params" not in mixed
    assert "tokenizer_sha256" not in dense and "tokenizer_sha256" not in mixed


def test_a_models_shape_from_its_blob_when_ollama_runs_on_this_machine(tmp_path):
    """The blob the modelfile names (``sha256:`` as older docs spell it, ``sha256-`` on disk) is a real GGUF
    written by the gguf package: its header gives the whole shape, as for a llama-server model."""
    import hashlib

    import numpy as np
    import gguf

    from cardproof.daemon.server import modelfile

    blobs = tmp_path / "blobs"
    blobs.mkdir()
    hexd = hashlib.sha256(b"moe").hexdigest()
    w = gguf.GGUFWriter(str(blobs / f"sha256-{hexd}"), "qwen3moe")
    w.add_basename("Qwen3")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b"])
    w.add_expert_count(4)
    w.add_expert_used_count(1)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((8, 8), dtype=np.float32))
    w.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((4, 16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    info = {"general.architecture": "qwen3moe", "general.parameter_count": 999}
    with RecordedOllama(shows={"moe": _show(info, f"FROM {blobs}/sha256:{hexd}\n")}) as srv:
        b = OllamaBackend(srv.url, timeout_s=10)
        row = b.describe_model("moe")
        b.close()
    header = modelfile.gguf_header(blobs / f"sha256-{hexd}")
    assert row["params"] == header["params"] == 64 + 4 * 128
    assert row["active_params"] == 64 + 128 and row["tokenizer_sha256"] == header["tokenizer_sha256"]
    assert row["basename"] == "Qwen3" and row["expert_count"] == 4
