"""Cached prompt tokens read from llama-server's per-task log lines, matched to samples by their counters.

Against the real llama-server the log-derived figure is checked against the
server's own ``timings.cache_n`` for every sample, a repeated-prompt canary
included; Ollama (no cache counter in its API) is tested with RECORDED
responses and log lines in the llama-server format its runner writes.
"""

from __future__ import annotations

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.requests import Task, load_tasks, match_task, tasks_in
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from recorded_servers import RecordedOllama
from test_backends_ollama import _campaign


def test_log_tasks_give_the_servers_own_cache_counter_for_every_sample(llama_server, tmp_path):
    store = open_store(tmp_path / "c.db")
    text = campaign_text(llama_server.url, models=("tiny-b",), reps=2, max_tokens=8).replace(
        'name = "test"', 'name = "test"\ncanaries = true').replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{llama_server.log_path}"')
    out = run_campaign(store, parse_campaign(text, "c.toml"), echo=lambda s: None)
    rows = store.db.execute("select load_id, prompt_tokens, generated_tokens, prompt_ms, cached_tokens, kind "
                            "from samples where run_id = ? and error_kind is null and load_id is not null "
                            "and cached_tokens is not null", [out.run_id]).fetchall()
    assert len(rows) >= 4
    compared = hits = 0
    for load_id, prompt_n, gen_n, prompt_ms, cached, kind in rows:
        task = match_task(load_tasks(store.db, load_id), prompt_n, gen_n, prompt_ms)
        if task is None:
            continue  # two tasks with the very same counters: not decidable, and not guessed
        assert task.cached == cached, (kind, task, cached)  # the log agrees with timings.cache_n
        compared += 1
        hits += cached > 0
    assert compared >= 4 and hits >= 1  # the prompt_cache_hit canary repeats a prompt with the cache on
    store.close()


def test_a_task_is_matched_only_when_its_counters_are_unique():
    lines = [
        (1, "slot x: id  0 | task 5 | new prompt, n_ctx_slot = 2048, n_keep = 0, task.n_tokens = 40"),
        (2, "slot print_timing: id  0 | task 5 | prompt eval time =      12.34 ms /    40 tokens (x)"),
        (3, "slot print_timing: id  0 | task 5 |        eval time =      50.00 ms /     8 tokens (x)"),
        (4, "slot x: id  0 | task 0 | new prompt, n_ctx_slot = 2048, n_keep = 0, task.n_tokens = 40"),  # restart
        (5, "slot print_timing: id  0 | task 0 | prompt eval time =      12.34 ms /    40 tokens (x)"),
        (6, "slot print_timing: id  0 | task 0 |        eval time =      51.00 ms /     8 tokens (x)"),
        (7, "slot x: id  0 | task 1 | new prompt, n_ctx_slot = 2048, n_keep = 0, task.n_tokens = 300"),
        (8, "slot print_timing: id  0 | task 1 | prompt eval time =      20.01 ms /    12 tokens (x)"),
        (9, "slot print_timing: id  0 | task 1 |        eval time =      50.00 ms /     8 tokens (x)"),
    ]
    tasks = tasks_in(lines)
    assert [t.task for t in tasks] == [5, 0, 1]
    assert match_task(tasks, 40, 8, 12.34) is None  # two tasks print the same counters: undecided
    t = match_task(tasks, 12, 8, 20.0149)
    assert t == Task(1, 300, 20.01, 12, 8, [7, 8, 9]) and t.cached == 288
    assert match_task(tasks, 12, 8, 20.03) is None  # the time must agree to the printed 0.01 ms
    assert match_task(tasks, 12, None, 20.01) is None


def test_recorded_ollama_cache_hit_comes_from_its_runners_log_and_fires_the_gate(tmp_path):
    """Ollama passes llama-server's prompt_n/prompt_ms/predicted_n through (llm/llama_server.go); recorded
    counters (chat_final.json: 11 prompt tokens in 13074791 ns, 18 generated) meet recorded-format lines."""
    digest = "200765e1283640ffbd013184bf496e261032fa75b99498a9613be4e94d63ad52"
    load = [
        'time=2026-06-28T20:51:02.167Z level=INFO source=llama_server.go:406 msg="starting llama-server" '
        f'cmd="/usr/lib/ollama/llama-server --model /var/lib/ollama/blobs/sha256-{digest} --port 42103 -c 8192 -np 1"',
        'time=2026-06-28T20:51:17.534Z level=INFO source=llama_server.go:1201 msg="llama-server started in 15.37 seconds"',
        'time=2026-06-28T20:51:17.595Z level=INFO source=sched.go:739 msg="loaded runners" count=1',
    ]
    chat = [
        "slot update_slots: id  0 | task 79 | new prompt, n_ctx_slot = 8192, n_keep = 4, task.n_tokens = 523",
        "slot update_slots: id  0 | task 79 | cached n_tokens = 512, memory_seq_rm [512, end)",
        "slot print_timing: id  0 | task 79 | prompt eval time =      13.07 ms /    11 tokens (    1.19 ms per token)",
        "slot print_timing: id  0 | task 79 |        eval time =      52.48 ms /    18 tokens (    2.92 ms per token)",
    ]
    log = tmp_path / "ollama.log"
    log.write_text("")
    with RecordedOllama(log_path=log, load_lines=load, chat_lines=chat) as srv:
        store = open_store(tmp_path / "o.db")
        text = _campaign(srv.url).replace("repetitions = 2", "repetitions = 1").replace(
            "request_timeout_s = 30", f'request_timeout_s = 30\nlog_file = "{log}"')
        lines: list[str] = []
        out = run_campaign(store, parse_campaign(text), echo=lines.append)
    (cached, resp), = store.db.execute("select cached_tokens, response_json from samples where run_id = ? "
                                       "and kind = 'measure'", [out.run_id]).fetchall()
    assert cached == 512 and '"task":79' in resp
    gate = store.db.execute("select fired, observed_text from gate_results where gate = 'prompt_cache_hit'").fetchone()
    assert gate[0] == 1 and "server log, task 79: prompt tokens in all: 523" in gate[1]
    assert any("cached tokens of 1 samples read from the server log" in ln for ln in lines)
    store.close()
