"""Access-log lines -> requests_seen -> the foreign_load gate, and llama-swap's swap events.

The Ollama lines are RECORDED from published Ollama issues (#11819, #13552)
and docs; the llama-server line from llama.cpp's own log format; the
llama-swap lines follow its source (tests/fixtures/llamaswap/README.md).
"""

from __future__ import annotations

import json
from datetime import datetime

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.judge import judge_run
from cardproof.daemon.logs import import_path
from cardproof.daemon.logs.access import parse_access
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from recorded_servers import FIXTURES, RecordedOllama


def test_gin_swap_and_llama_server_access_lines_parse():
    gin = parse_access('[GIN] 2025/08/07 - 18:27:18 | 200 |       1m16s |     192.168.1.5 | POST     "/api/chat"')
    assert (gin.client, gin.method, gin.path, gin.status, gin.source) == ("192.168.1.5", "POST", "/api/chat", 200,
                                                                          "ollama-gin")
    assert gin.logged_time == "2025-08-07T18:27:18" and gin.duration == "1m16s"
    swap = parse_access('[INFO] Request 192.168.1.20 "POST /v1/chat/completions HTTP/1.1" 200 5123 "python-httpx/0.28.1" 2.314s')
    assert (swap.client, swap.path, swap.status, swap.source) == ("192.168.1.20", "/v1/chat/completions", 200, "llama-swap")
    ls = parse_access("srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200")
    assert (ls.client, ls.method, ls.status) == ("127.0.0.1", "POST", 200)
    # the body dump that follows at high verbosity is not a request
    assert parse_access('srv  log_server_r: request:  {"max_tokens": 512}') is None
    assert parse_access("srv  update_slots: all slots are idle") is None


def test_recorded_gin_log_import_fills_requests_seen(tmp_path):
    store = open_store(tmp_path / "a.db")
    stats = import_path(store, FIXTURES / "ollama" / "gin.log")
    rows = list(store.db.query("select client, method, path, status, ts, source, line_id from requests_seen order by id"))
    assert stats["requests"] == 3
    assert [(r["client"], r["method"], r["path"]) for r in rows] == [
        ("192.168.0.131", "POST", "/api/chat"), ("127.0.0.1", "GET", "/api/tags"), ("192.168.1.5", "POST", "/api/chat")]
    assert rows[0]["ts"] == "2025-08-20T11:41:40"  # a plain file: the line's own (zone-less) clock
    raw = store.db.execute("select raw from log_lines where id = ?", [rows[0]["line_id"]]).fetchone()[0]
    assert raw.startswith("[GIN] 2025/08/20")
    import_path(store, FIXTURES / "ollama" / "gin.log")  # nothing new: no request counted twice
    assert store.db["requests_seen"].count == 3


def test_llama_swap_log_swap_events_are_facts():
    lines = (FIXTURES / "llamaswap" / "swap.log").read_text().splitlines()
    facts = [(f.name, f.value_text, f.value_num) for line in lines for f in parse_line(line)]
    assert ("swap_to_model", "qwen", None) in facts
    assert ("swap_evicting", "gemma", None) in facts
    assert ("upstream_ready", "qwen", None) in facts
    assert ("ttl_unload_seconds", "gemma-3-1b-it", 300.0) in facts


def _journal_line(ts_iso: str, message: str, n: int) -> str:
    usec = int(datetime.fromisoformat(ts_iso).timestamp() * 1_000_000)
    return json.dumps({"__REALTIME_TIMESTAMP": str(usec), "__CURSOR": f"s=1;i={n};t={usec:x}",
                       "_PID": "4242", "_SYSTEMD_UNIT": "ollama.service", "MESSAGE": message})


def test_recorded_foreign_requests_in_the_access_log_fire_foreign_load(tmp_path):
    """Ollama has no /metrics: GIN lines from another address inside the cell are foreign load."""
    with RecordedOllama() as srv:
        text = f"""
[campaign]
name = "foreign"
prompt_classes = ["short"]
repetitions = 2
max_tokens = 8
[server]
backend = "ollama"
url = "{srv.url}"
[[models]]
name = "gemma4"
"""
        store = open_store(tmp_path / "f.db")
        camp = parse_campaign(text)
        out = run_campaign(store, camp, echo=lambda s: None)
    first = store.db.execute("select started_at from samples where run_id = ? order by id", [out.run_id]).fetchone()[0]
    gin = '[GIN] 2025/08/07 - 18:27:18 | 200 |  1.2s | {addr} | {method}     "{path}"'
    export = tmp_path / "journal.json"
    export.write_text("\n".join([
        _journal_line(first, gin.format(addr="192.168.1.5", method="POST", path="/api/chat"), 1),
        _journal_line(first, gin.format(addr="192.168.1.5", method="GET", path="/api/tags"), 2),
        _journal_line(first, gin.format(addr="127.0.0.1", method="POST", path="/api/chat"), 3),  # ours
    ]) + "\n")
    import_path(store, export, fmt="journal-json", run_id=out.run_id)
    judge_run(store, out.run_id, camp.gates)
    results = list(store.db.query("select fired, observed_text from gate_results where gate = 'foreign_load'"))
    assert results and all(r["fired"] == 1 for r in results)
    assert "192.168.1.5" in results[0]["observed_text"] and "foreign requests: 1," in results[0]["observed_text"]
    store.close()
