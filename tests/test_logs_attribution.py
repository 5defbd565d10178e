"""Attribution of log lines to loads: by port, PID and explicit boundaries, never by time.

The router log is a recording of this project's real llama-server
(tests/fixtures/logs/router-interleaved.log, written by tests/logs_helpers.py):
tiny-a (speculative decoding with a draft model) and tiny-b (none) served in
parallel, so their lines interleave. The port of each child was read from
the router's /models API when the recording was made, independently of the log.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cardproof.daemon.logs import attribute_run, capture_file, import_path, load_summaries
from cardproof.daemon.store import open_store, utcnow

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "router-interleaved.log"
PORT_TRUTH = {54611: "tiny-a", 45707: "tiny-b"}  # from GET /models when the fixture was recorded


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


def rows(store):
    return [dict(zip(("id", "raw", "port", "load_id", "attribution", "model"), r)) for r in store.db.execute(
        "select l.id, l.raw, l.port, l.load_id, l.attribution, d.model_name from log_lines l "
        "left join loads d on d.id = l.load_id order by l.id")]


def test_interleaved_router_log_is_attributed_line_by_line(store):
    stats = import_path(store, FIXTURE)
    lines = rows(store)
    assert stats["lines"] == len(FIXTURE.read_text().splitlines()) == len(lines)
    by_model = {"tiny-a": [], "tiny-b": []}
    for ln in lines:
        m = re.match(r"\[(\d+)\] ", ln["raw"])
        if m:  # a child's line: its load is the one on that port
            assert ln["model"] == PORT_TRUTH[int(m[1])], ln
            assert ln["attribution"] == "port"
        elif "proxying request to model" in ln["raw"]:
            assert ln["model"] == re.search(r"model (\S+) on", ln["raw"])[1]
        elif re.search(r"spawning server instance with name=|exited with status|stopping model instance", ln["raw"]):
            assert ln["model"] == re.search(r"name=(\S+)", ln["raw"])[1] and ln["attribution"] == "boundary"
        if ln["model"]:
            by_model[ln["model"]].append(ln["id"])
    a, b = by_model["tiny-a"], by_model["tiny-b"]
    assert min(a) < max(b) and min(b) < max(a), "the two loads' lines must interleave for this test to mean anything"
    spec_none = [ln for ln in lines if "no implementations specified for speculative decoding" in ln["raw"]]
    spec_on = [ln for ln in lines if "draft acceptance" in ln["raw"] or "adding speculative implementation" in ln["raw"]]
    assert spec_none and all(ln["model"] == "tiny-b" for ln in spec_none)
    assert spec_on and all(ln["model"] == "tiny-a" for ln in spec_on)
    # the seeds' trap: "draft: 0.000 MiB" lines printed while tiny-a (speculative) was serving belong to tiny-b
    trap = [ln for ln in lines if "draft: 0.000 MiB" in ln["raw"] and min(a) < ln["id"] < max(a)]
    assert trap and all(ln["model"] == "tiny-b" for ln in trap)


def test_unprovable_lines_stay_unattributed(store):
    import_path(store, FIXTURE)
    unplaced = [ln for ln in rows(store) if ln["load_id"] is None]
    assert unplaced and {ln["attribution"] for ln in unplaced} == {"unattributed"}
    assert [ln["raw"] for ln in unplaced if ln["raw"].startswith("[")] == []  # every child line has its load
    # router start-up lines belong to no load
    startup = [ln for ln in rows(store) if "starting server in router mode" in ln["raw"]]
    assert startup and startup[0]["load_id"] is None


def test_child_lines_without_their_spawn_line_are_unattributed(store, tmp_path):
    text = FIXTURE.read_text().splitlines()
    cut = next(i for i, t in enumerate(text) if "name=tiny-b on port" in t) + 1
    part = tmp_path / "mid.log"
    part.write_text("\n".join(text[cut:]) + "\n")  # capture started after tiny-b was spawned
    import_path(store, part)
    orphans = [ln for ln in rows(store) if ln["raw"].startswith("[45707]")]  # tiny-b's child, spawn line cut
    placed = [ln for ln in rows(store) if ln["raw"].startswith("[54611]")]  # tiny-a's child, spawned after the cut
    assert orphans and all(ln["load_id"] is None and ln["attribution"] == "unattributed" for ln in orphans)
    assert placed and {ln["model"] for ln in placed} == {"tiny-a"}


def test_facts_are_typed_per_device_and_draft_scoped(store):
    import_path(store, FIXTURE)
    loads = {ld["model"]: ld for ld in load_summaries(store.db)}
    a, b = loads["tiny-a"]["facts"], loads["tiny-b"]["facts"]
    assert b["spec_type"] == "none" and "draft_model" not in b
    assert a["spec_type"] == "draft-simple" and a["spec_draft_n_max"] == 3
    assert a["draft_model"].endswith("tiny-draft.gguf")
    assert a["model_buffer_mib"] == {"AMX": 0.56, "CPU_Mapped": 0.81}  # the target's, not the draft's
    assert a["draft_model_buffer_mib"] == {"AMX": 0.07, "CPU_Mapped": 0.2}
    assert isinstance(a["kv_buffer_mib"]["CPU"], float) and a["ctx_size"] == 2048
    assert a["draft_acceptance"]["requests"] == 6 and a["draft_acceptance"]["generated"] > 0
    assert b["load_seconds"] > 0
    # every fact points at a line of its own load
    for ld in loads.values():
        for name, where in ld["fact_lines"].items():
            ids = where.values() if isinstance(where, dict) else (where if isinstance(where, list) else [where])
            for lid in ids:
                assert store.db.execute("select load_id from log_lines where id = ?", [lid]).fetchone()[0] == ld["id"]


def test_resumed_capture_attributes_like_one_import(store, tmp_path):
    text = FIXTURE.read_bytes()
    live = tmp_path / "live.log"
    half = text.index(b"\n", len(text) // 2) + 1
    live.write_bytes(text[:half] + b"[54611] 0.00.5")  # the writer is mid-line
    first = capture_file(store, live)
    live.write_bytes(text)
    second = capture_file(store, live)
    third = capture_file(store, live)
    assert first["lines"] + second["lines"] == len(text.splitlines())
    assert third["lines"] == 0  # idempotent
    once = open_store(tmp_path / "once.db")
    import_path(once, FIXTURE)
    assert [(r["raw"], r["model"], r["attribution"]) for r in rows(store)] == [
        (r["raw"], r["model"], r["attribution"]) for r in rows(once)]
    once.close()


def _restarted_single_server_log() -> str:
    """Lines of this build's single-model server (no router), restarted once, one file."""
    fx = FIXTURE.read_text().splitlines()
    b = [re.sub(r"^\[45707\] ", "", t) for t in fx if t.startswith("[45707] ")]
    a = [re.sub(r"^\[54611\] ", "", t) for t in fx if t.startswith("[54611] ")]
    return "\n".join(b + a) + "\n"


def test_single_process_stream_split_at_process_start(store, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(_restarted_single_server_log())
    import_path(store, log)
    loads = load_summaries(store.db)
    assert [ld["model"] for ld in loads] == ["tiny-b.gguf", "tiny-a.gguf"]
    for ln in rows(store):
        assert ln["attribution"] == "boundary"  # lines before "loading model" were held, then bound
    a = next(ld for ld in loads if ld["model"] == "tiny-a.gguf")
    assert a["facts"]["spec_type"] == "draft-simple"
    assert next(ld for ld in loads if ld["model"] == "tiny-b.gguf")["facts"]["spec_type"] == "none"


OLLAMA = [  # lines in the formats of github.com/ollama/ollama issues #11819, #11986, #13552
    'time=2025-08-20T11:41:19.000Z level=INFO source=server.go:175 msg=offload library=cuda layers.requested=-1 '
    'layers.model=81 layers.offload=81 layers.split="" projector.weights="795.9 MiB" projector.graph="1.0 GiB"',
    'time=2025-08-20T11:41:19.100Z level=INFO source=server.go:438 msg="starting llama server" cmd="/usr/local/bin/'
    'ollama runner --model /m/blobs/sha256-aaa --ctx-size 8192 --batch-size 512 --n-gpu-layers 81 --port 39041"',
    'time=2025-08-20T11:41:19.101Z level=INFO source=sched.go:481 msg="loaded runners" count=1',
    "load_tensors: offloaded 81/81 layers to GPU",
    "load_tensors:        CUDA0 model buffer size = 24277.75 MiB",
    'time=2025-08-20T11:41:26.076Z level=INFO source=server.go:1332 msg="llama runner started in 8.62 seconds"',
    '[GIN] 2025/08/20 - 11:41:40 | 200 | 57.956598944s |   192.168.0.131 | POST     "/api/chat"',
    'time=2025-08-20T11:42:00.000Z level=INFO source=server.go:438 msg="starting llama server" cmd="/usr/local/bin/'
    'ollama runner --model /m/blobs/sha256-bbb --ctx-size 4096 --batch-size 512 --n-gpu-layers 20 --port 39042"',
    'time=2025-08-20T11:42:00.001Z level=INFO source=sched.go:481 msg="loaded runners" count=2',
    "load_tensors: offloaded 20/33 layers to GPU",
    'time=2025-08-20T11:42:03.000Z level=INFO source=server.go:1332 msg="llama runner started in 3.00 seconds"',
    '[GIN] 2025/08/20 - 11:42:10 | 200 |  1.2s |   192.168.0.131 | POST     "/api/chat"',
]


def test_ollama_boundaries_only_while_one_runner_is_loaded(store, tmp_path):
    log = tmp_path / "ollama.log"
    log.write_text("\n".join(OLLAMA) + "\n")
    import_path(store, log)
    got = [(r["raw"][:40], r["model"]) for r in rows(store)]
    assert [m for _, m in got] == [
        "sha256-aaa", "sha256-aaa", "sha256-aaa", "sha256-aaa", "sha256-aaa", "sha256-aaa", "sha256-aaa",
        "sha256-bbb", None, None, "sha256-bbb", None]  # two runners loaded: the runner's lines are not provable
    first = next(ld for ld in load_summaries(store.db) if ld["model"] == "sha256-aaa")
    assert first["facts"]["offloaded_layers"] == 81 and first["facts"]["projector_mib"] == 1819.9
    assert first["facts"]["model_buffer_mib"] == {"CUDA0": 24277.75} and first["facts"]["load_seconds"] == 8.62


def _runner_rows(store, run_id: int) -> dict[str, int]:
    """Loads as the runner writes them: explicit loads with the router's port."""
    ids = {}
    for name, port, status in (("tiny-b", 45707, "loaded"), ("tiny-a", None, "loaded"), ("tiny-a", None, "already_loaded")):
        mid = store.upsert_model({"name": name, "digest": None})
        ids.setdefault(name, []).append(store.insert("loads", {
            "run_id": run_id, "model_id": mid, "trigger": "explicit", "requested_at": utcnow(),
            "status": status, "port": port}))
    return ids


def test_attribute_run_links_log_loads_to_runner_loads(store):
    cid = store.insert("campaigns", {"name": "t", "sha256": "x", "registered_at": utcnow()})
    run_id = store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": "completed"})
    runner = _runner_rows(store, run_id)
    import_path(store, FIXTURE, run_id=run_id)
    result = attribute_run(store, run_id)
    assert sorted(how for _, _, how in result["matched"]) == ["order", "port"]
    assert result["runner_unmatched"] == [runner["tiny-a"][1]]  # already loaded: no spawn in this log
    b, a = runner["tiny-b"][0], runner["tiny-a"][0]
    assert store.db.execute("select port from loads where id = ?", [a]).fetchone()[0] == 54611  # filled from the log
    for ln in rows(store):
        m = re.match(r"\[(\d+)\] ", ln["raw"])
        if m:
            assert ln["load_id"] == (a if PORT_TRUTH[int(m[1])] == "tiny-a" else b)
    assert store.db.execute("select count(*) from facts where load_id not in (?, ?)", [a, b]).fetchone()[0] == 0
    summaries = {ld["id"]: ld for ld in load_summaries(store.db, run_id=run_id)}
    assert set(summaries) == {a, b, runner["tiny-a"][1]}  # merged log rows are not listed twice
    assert summaries[a]["facts"]["spec_type"] == "draft-simple" and summaries[a]["origin"] == "runner"
    again = attribute_run(store, run_id)
    assert again["matched"] == [] and store.db.execute(
        "select count(*) from log_lines where load_id = ?", [a]).fetchone()[0] == summaries[a]["lines"]
    # a later capture of the same source follows the merge
    assert capture_file(store, FIXTURE)["lines"] == 0



# Ollama 0.12 and later, in the formats of published server logs (github.com/ollama/ollama issues,
# server.go / sched.go / device.go / llama_server.go lines): GPU discovery runners without a model,
# a runner started with --model whose count line comes only after its whole load, and Ollama
# running llama.cpp's own llama-server as the runner. Values and paths are made up for the test.
OLLAMA_NEW = [
    'time=2026-05-20T19:18:00.100Z level=INFO source=runner.go:67 msg="discovering available GPUs..."',
    'time=2026-05-20T19:18:00.101Z level=INFO source=server.go:430 msg="starting runner" '
    'cmd="/usr/local/bin/ollama runner --ollama-engine --port 40001"',
    "ggml_cuda_init: found 1 CUDA devices:",  # the discovery runner's own output: no load's line
    'time=2026-05-20T19:18:01.984Z level=INFO source=server.go:430 msg="starting runner" '
    'cmd="/usr/local/bin/ollama runner --model /var/lib/ollama/blobs/sha256-c0ffee --port 46001"',
    'time=2026-05-20T19:18:01.985Z level=INFO source=sched.go:484 msg="system memory" total="13.5 GiB" free="7.3 GiB"',
    'time=2026-05-20T19:18:01.985Z level=INFO source=device.go:240 msg="model weights" device=CUDA0 size="1.5 GiB"',
    'time=2026-05-20T19:18:01.985Z level=INFO source=device.go:262 msg="compute graph" device=CUDA0 size="252.2 MiB"',
    "load_tensors: offloaded 27/27 layers to GPU",
    "llama_context:      CUDA0 compute buffer size =   252.25 MiB",
    'time=2026-05-20T19:18:03.063Z level=INFO source=server.go:1388 msg="llama runner started in 1.08 seconds"',
    'time=2026-05-20T19:18:03.063Z level=INFO source=sched.go:561 msg="loaded runners" count=1',
    '[GIN] 2026/05/20 - 19:18:29 | 200 | 28.431007734s |       127.0.0.1 | POST     "/api/chat"',
    'time=2026-05-20T19:18:29.816Z level=INFO source=server.go:430 msg="starting runner" '
    'cmd="/usr/local/bin/ollama runner --ollama-engine --port 38613"',
    "ggml_cuda_init: found 1 CUDA devices:",  # discovery again: the stream is no longer one runner's
    'time=2026-06-28T20:51:02.166Z level=INFO source=server.go:109 msg="using llama-server for model" '
    'model=/var/lib/ollama/blobs/sha256-beef',
    'time=2026-06-28T20:51:02.167Z level=INFO source=llama_server.go:406 msg="starting llama-server" '
    'cmd="/usr/lib/ollama/llama-server --model /var/lib/ollama/blobs/sha256-beef --port 42103 --host 127.0.0.1 '
    '-c 32768 -np 1 --no-log-prefix --flash-attn auto"',
    "load_tensors: offloaded 15/33 layers to GPU",
    "llama_kv_cache:      CUDA0 KV buffer size =  1792.00 MiB",
    "common_speculative_init: no implementations specified for speculative decoding",
    'time=2026-06-28T20:51:17.534Z level=INFO source=llama_server.go:1201 msg="llama-server started in 15.37 seconds"',
    'time=2026-06-28T20:51:17.595Z level=INFO source=sched.go:739 msg="loaded runners" count=1',
    'time=2026-06-28T20:51:17.595Z level=INFO source=llama_server.go:1201 msg="llama-server started in 15.43 seconds"',
    "slot print_timing: id  0 | task 0 |        eval time =   20840.36 ms /    64 tokens",
]


def test_ollama_runner_and_llama_server_starts_are_load_boundaries_discovery_runners_are_not(store, tmp_path):
    """Recorded line formats (Ollama 0.12+ and its llama-server runner); no Ollama binary exists here."""
    log = tmp_path / "ollama-new.log"
    log.write_text("\n".join(OLLAMA_NEW) + "\n")
    import_path(store, log)
    got = [r["model"] for r in rows(store)]
    assert got == [
        None, None, None,  # discovery: no load, its output unattributed
        *["sha256-c0ffee"] * 8,  # start, held plan and load lines bound by count=1, the ready line, the count
        "sha256-c0ffee",  # served while the runner was alone
        None, None,  # a discovery runner writes into the stream: nothing is provable now
        "sha256-beef",  # the "using llama-server" line is the plan of the next start
        *["sha256-beef"] * 8,
    ]
    loads = {ld["model"]: ld for ld in load_summaries(store.db)}
    assert set(loads) == {"sha256-c0ffee", "sha256-beef"}  # discovery runners are no loads
    first, second = loads["sha256-c0ffee"]["facts"], loads["sha256-beef"]["facts"]
    assert first["plan_weights_mib"] == {"CUDA0": 1536.0} and first["plan_compute_mib"] == {"CUDA0": 252.2}
    assert first["compute_buffer_mib"] == {"CUDA0": 252.25} and first["load_seconds"] == 1.08
    assert second["ctx_size"] == 32768 and second["spec_type"] == "none" and second["offloaded_layers"] == 15
    assert second["kv_buffer_mib"] == {"CUDA0": 1792.0}
    ready = store.db.execute("select l.raw from loads d join log_lines l on l.id = d.ready_line_id "
                             "where d.model_name = 'sha256-beef'").fetchone()[0]
    assert "15.37 seconds" in ready  # Ollama prints the started-in line twice; the first is the load's


def test_ollama_held_lines_survive_an_import_that_stops_inside_the_window(store, tmp_path):
    """Two captures of a growing file, the first ending between a runner's start and its count line."""
    log = tmp_path / "ollama-grow.log"
    cut = 6  # after the start, the plan lines and one llama.cpp line of the first runner
    log.write_text("\n".join(OLLAMA_NEW[:cut]) + "\n")
    capture_file(store, log)
    assert [r["model"] for r in rows(store)][3:] == ["sha256-c0ffee", None, None]  # held, not yet proven alone
    with log.open("a") as f:
        f.write("\n".join(OLLAMA_NEW[cut:]) + "\n")
    capture_file(store, log)
    other = open_store(tmp_path / "once.db")
    (tmp_path / "once.log").write_text("\n".join(OLLAMA_NEW) + "\n")
    import_path(other, tmp_path / "once.log")
    assert [r["model"] for r in rows(store)] == [r["model"] for r in rows(other)]  # same as in one import
    other.close()
