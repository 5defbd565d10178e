"""Ollama variants against a RECORDED Ollama (tests/recorded_servers.py; no Ollama binary can run here).

What is checked is what cardproof sends: the variant is asked for under the model's own name, with
its settings as request options on its load and on every measured request (a request whose options
differ would make Ollama reload the runner inside a measurement). What the runner did with them is
its log's to say; the recorded server writes none, so the verdict is "no log lines", never "took".
"""

from __future__ import annotations

import sqlite3

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from recorded_servers import RecordedOllama


def _campaign(url: str) -> str:
    return f"""
[campaign]
name = "ollama-variants"
prompt_classes = ["short"]
repetitions = 2
max_tokens = 8

[server]
backend = "ollama"
url = "{url}"
request_timeout_s = 30
num_ctx = 4096

[[models]]
name = "gemma4"

[variants]
threads = [2]

[variants.sets]
big_batch = ["-b", "1024", "-c", "8192"]
"""


def test_recorded_ollama_variant_is_the_model_with_its_options_on_every_request(tmp_path):
    with RecordedOllama() as srv:
        store = open_store(tmp_path / "o.db")
        out = run_campaign(store, parse_campaign(_campaign(srv.url)), echo=lambda s: None)
        requests = list(srv.requests)
    assert out.status == "completed" and out.measured == out.planned == 2 + 2 * 2
    by_options: dict[str, list] = {}
    for method, path, body, _ in requests:
        if path in ("/api/generate", "/api/chat") and body and body.get("keep_alive") != 0:
            assert body["model"] == "gemma4"  # never the variant's own name: Ollama knows only its models
            opts = {k: v for k, v in (body.get("options") or {}).items() if k != "num_predict"}
            by_options.setdefault(path, []).append(opts)
    assert {"num_ctx": 4096, "num_thread": 2} in by_options["/api/generate"]
    assert {"num_ctx": 8192, "num_batch": 1024} in by_options["/api/generate"]  # the variant's num_ctx wins
    chats = by_options["/api/chat"]
    assert chats.count({"num_ctx": 4096}) == 2 and chats.count({"num_ctx": 4096, "num_thread": 2}) == 2
    assert chats.count({"num_ctx": 8192, "num_batch": 1024}) == 2
    # before each variant's load the model was unloaded, so the load is the variant's own
    unloads = [b for m, p, b, _ in requests if p == "/api/generate" and b.get("keep_alive") == 0]
    assert len(unloads) >= 2
    conn = sqlite3.connect(tmp_path / "o.db")
    rows = conn.execute("select name, server_kind, status, server_args_json from variants order by position").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("big_batch", "ollama", "no_log"), ("t2", "ollama", "no_log")]
    names = {n for (n,) in conn.execute("select m.name from cells c join models m on m.id = c.model_id")}
    assert names == {"gemma4", "gemma4~big_batch", "gemma4~t2"}
    store.close()


def test_recorded_ollama_pinned_model_keeps_its_runner(tmp_path):
    """Ollama runs one runner per model: a variant of the pinned model would replace the production
    runner, so it is not loaded and its samples say why."""
    text = _campaign("URL").replace('name = "gemma4"', 'name = "gemma4"\npinned = true')
    with RecordedOllama() as srv:
        store = open_store(tmp_path / "o.db")
        out = run_campaign(store, parse_campaign(text.replace("URL", srv.url)), echo=lambda s: None)
    assert out.measured == 2 and out.failed == 4
    conn = sqlite3.connect(tmp_path / "o.db")
    assert {s for (s,) in conn.execute("select status from variants")} == {"refused"}
    kinds = {(k, "pinned" in t) for k, t in conn.execute(
        "select error_kind, error_text from samples where error_kind is not null")}
    assert kinds == {("variant_not_loaded", True)}
    store.close()
