"""Every request cardproof sent is its own in the server's log; only the rest is called foreign.

Real parts: a router-mode llama-server of the module's own (its log holds this run's lines only), a real
run with measured samples, canaries (one evicts its model and reloads it inside its request), probes,
load and depth steps, the log captured and attributed, a real SQLite store.
"""

from __future__ import annotations

import re
import time

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.summary import load_summaries
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text


@pytest.fixture(scope="module")
def probed_run(own_router, tmp_path_factory):
    text = (campaign_text(own_router.url, reps=2, max_tokens=8)
            .replace('name = "test"', 'name = "test"\ncanaries = true')
            .replace("request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{own_router.log_path}"')
            + '\n[probes]\nrun = ["tools", "coding"]\nrepeat = 1\nmax_tokens = 16\n'
            + '\n[load]\nstreams = [1, 2]\nrequests_per_stream = 1\nprompt_class = "short"\nmax_tokens = 8\n'
            + '\n[depth]\ntokens = [0, 128]\nrepetitions = 1\nmax_tokens = 8\n'
            + "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n")
    db = tmp_path_factory.mktemp("own") / "r.db"
    store = open_store(db)
    try:
        outcome = run_campaign(store, parse_campaign(text, "own.toml"), echo=lambda _line: None)
    finally:
        store.close()
    return db, outcome.run_id


def test_no_request_cardproof_sent_is_called_foreign(probed_run):
    db, run_id = probed_run
    store = open_store(db, mode="ro")
    try:
        loads = load_summaries(store.db, run_id)
        probes = store.db.execute("select count(*) from probe_results where run_id = ?", [run_id]).fetchone()[0]
        canaries = store.db.execute("select count(*) from samples where run_id = ? and kind = 'canary'",
                                    [run_id]).fetchone()[0]
    finally:
        store.close()
    assert probes >= 2 and canaries >= 2
    own = sum(ld["observed"]["own"] for ld in loads)
    assert own >= probes + canaries  # the server counted them, and they were recognised
    foreign = {ld["id"]: ld["observed"]["count"] for ld in loads if ld["observed"]["count"]}
    assert foreign == {}


def _timing_lines(path) -> int:
    """How many tasks the server's log has finished so far (its generation counters)."""
    return len(re.findall(r"(?<!prompt )eval time *=", path.read_text(errors="replace")))


def test_a_request_from_elsewhere_is_still_foreign(probed_run, own_router, tmp_path):
    """One request nobody stored, sent to the same server while its log is captured, stays foreign."""
    import shutil

    import httpx

    from cardproof.daemon.logs import attribute_run, capture_file

    db, run_id = probed_run
    copy = tmp_path / "r.db"
    shutil.copy(db, copy)
    before = _timing_lines(own_router.log_path)
    httpx.post(own_router.url + "/v1/chat/completions", timeout=60,
               json={"model": "tiny-a", "messages": [{"role": "user", "content": "someone else"}], "max_tokens": 5})
    # the router forwards its child's lines through a pipe: on a busy machine they reach the file after the answer
    deadline = time.monotonic() + 30
    while _timing_lines(own_router.log_path) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    store = open_store(copy)
    try:
        capture_file(store, own_router.log_path, run_id=run_id)
        attribute_run(store, run_id)
        loads = load_summaries(store.db, run_id)
    finally:
        store.close()
    assert sum(ld["observed"]["count"] for ld in loads) == 1


def test_the_gates_section_says_which_gates_judged_no_step_sample(probed_run, tmp_path):
    """"Every answered sample went through every gate" was false: some gates observe nothing on the samples of
    the load and depth steps (they read what only a measured cell takes). The section names them, from the store."""
    from click.testing import CliRunner

    from cardproof.cli import cli

    db, run_id = probed_run
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(tmp_path), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    en = (tmp_path / "site" / "runs" / f"run-{run_id}.md").read_text()
    de = (tmp_path / "site" / "runs" / f"run-{run_id}.de.md").read_text()
    store = open_store(db, mode="ro")
    try:
        unjudged = [r[0] for r in store.db.execute(
            "select g.gate from gate_results g join samples s on s.id = g.sample_id where s.run_id = ? "
            "and s.kind = 'load' group by g.gate having sum(g.fired is null) = count(*) order by g.gate", [run_id])]
    finally:
        store.close()
    assert "foreign_load" in unjudged
    assert "Every answered sample went through every gate." not in en
    said = en[en.index("Every answered sample of the measured cells went through every gate."):].split("\n", 1)[0]
    assert "except for these gates, which could observe nothing there and judged none of them:" in said
    for gate in unjudged:
        assert f"`{gate}` (concurrency steps, depth steps)" in said, (gate, said)
    assert "`load_time` (" not in said
    assert "außer durch diese Gates" in de


def test_the_second_clients_request_is_own_when_its_prompt_tokenizes_shorter(probed_run, tmp_path):
    """SmolLM2's tokenizer made the second client's prompt (another nonce) 5 tokens shorter than the canary's."""
    import shutil

    db, run_id = probed_run
    copy = tmp_path / "r.db"
    shutil.copy(db, copy)
    store = open_store(copy)
    try:
        canary = store.db.execute("select s.prompt_tokens, s.prompt_ms from canaries c join samples s on "
                                  "s.id = c.sample_id where c.gate = 'foreign_load'").fetchone()
        own = store.db.execute("select id, line_id from observed_requests where prompt_tokens = ? and "
                               "abs(prompt_ms - ?) < 0.01", list(canary)).fetchone()
        second = store.db.execute("select id from observed_requests where line_id > ? order by line_id limit 1",
                                  [own[1]]).fetchone()[0]
        with store.db.conn:
            store.db.execute("update observed_requests set prompt_tokens = prompt_tokens - 5 where id = ?", [second])
        loads = load_summaries(store.db, run_id)
    finally:
        store.close()
    assert sum(ld["observed"]["count"] for ld in loads) == 0
