"""Log evidence from the real llama-server: two loads interleaving in router mode,
and a single-model server restarted into the same log file.

The truth each test checks against comes from outside the log: the router's
/models API (which port serves which model) and the order in which the test
started the servers.
"""

from __future__ import annotations

import re

import httpx
import pytest

from cardproof.daemon.server import llamacpp
from cardproof.daemon.logs import capture_file, load_summaries
from cardproof.daemon.store import open_store
from logs_helpers import interleave_requests, start_router2


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


def test_real_router_two_loads_interleaved_attributed_line_by_line(tiny_models, tmp_path, store):
    server = start_router2(tiny_models, tmp_path)
    try:
        capture_file(store, server.log_path)  # start-up lines, before any load
        port_truth = interleave_requests(server.url)
    finally:
        server.stop()
    capture_file(store, server.log_path, final=True)  # the rest, resumed at the stored offset
    assert sorted(port_truth.values()) == ["tiny-a", "tiny-b"]
    lines = store.db.execute(
        "select l.id, l.raw, d.model_name, l.attribution from log_lines l left join loads d on d.id = l.load_id "
        "order by l.id").fetchall()
    assert len(lines) == len(server.log_path.read_text().splitlines())
    spans: dict[str, list[int]] = {"tiny-a": [], "tiny-b": []}
    for lid, raw, model, how in lines:
        m = re.match(r"\[(\d+)\] ", raw)
        if m:
            assert (model, how) == (port_truth[int(m[1])], "port"), raw
        if model:
            spans[model].append(lid)
    a, b = spans["tiny-a"], spans["tiny-b"]
    assert min(a) < max(b) and min(b) < max(a), "the loads did not interleave; the test proves nothing"
    loads = {ld["model"]: ld for ld in load_summaries(store.db)}
    assert loads["tiny-a"]["facts"]["spec_type"] == "draft-simple"
    assert loads["tiny-a"]["facts"]["draft_acceptance"]["requests"] == 6
    assert loads["tiny-b"]["facts"]["spec_type"] == "none"
    assert {loads[m]["port"] for m in loads} == set(port_truth)
    assert all(loads[m]["facts"]["kv_buffer_mib"]["CPU"] > 0 for m in loads)


def test_real_single_model_server_restarted_into_one_file(tiny_models, tmp_path, store):
    log = tmp_path / "single.log"
    common = ["-lv", "4", "--log-colors", "off", "--ctx-size", "2048", "--threads", "2", "--no-webui"]
    runs = [["-m", str(tiny_models["tiny-b"])],
            ["-m", str(tiny_models["tiny-a"]), "-md", str(tiny_models["tiny-draft"]), "--spec-type", "draft-simple"]]
    boundaries = []
    for args in runs:
        server = llamacpp.LlamaServerProcess(args + common, log_path=log)  # appends to the same file
        server.start()
        try:
            r = httpx.post(server.url + "/v1/chat/completions", timeout=60,
                           json={"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200
        finally:
            server.stop()
        boundaries.append(len(log.read_text().splitlines()))
    capture_file(store, log, final=True)
    rows = store.db.execute("select d.model_name from log_lines l left join loads d on d.id = l.load_id "
                            "order by l.id").fetchall()
    # every line up to the first server's stop is tiny-b's, every later one tiny-a's
    assert [r[0] for r in rows] == ["tiny-b.gguf"] * boundaries[0] + ["tiny-a.gguf"] * (boundaries[1] - boundaries[0])
    loads = {ld["model"]: ld for ld in load_summaries(store.db)}
    assert loads["tiny-a.gguf"]["facts"]["spec_type"] == "draft-simple"
    assert loads["tiny-b.gguf"]["facts"]["spec_type"] == "none"
    assert loads["tiny-b.gguf"]["end_reason"] == "process exit"
