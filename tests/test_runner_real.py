"""The runner against the real llama-server (router mode, tiny models)."""

from __future__ import annotations

import sqlite3
import time

import httpx
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import EXIT_FAILED, EXIT_PARTIAL, run_campaign
from cardproof.daemon.logs.timings import print_timings
from cardproof.daemon.store import open_store
from conftest import campaign_text, unload_all, wait_states

def test_stored_counters_equal_the_servers_own_timings(llama_server, tmp_path):
    """Cross-check with an independent source: the server's print_timing log lines."""
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(llama_server.url, models=("tiny-b",), classes=("short", "medium"), reps=2))
    db = tmp_path / "c.db"
    offset = llama_server.log_path.stat().st_size
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "[4/4] tiny-b medium reasoning=off rep 2/2: decode" in result.output
    time.sleep(0.3)  # the router relays child output asynchronously
    with llama_server.log_path.open("rb") as f:
        f.seek(offset)
        logged = print_timings(f.read().decode("utf-8", "replace"))
    rows = sqlite3.connect(db).execute(
        "select prompt_tokens, generated_tokens, prompt_ms, predicted_ms, prefill_tps, decode_tps "
        "from samples order by id"
    ).fetchall()
    assert len(rows) == 4 and len(logged) == 4
    for (p_n, g_n, p_ms, g_ms, p_tps, g_tps), log in zip(rows, logged):
        assert log["prompt"][1] == p_n
        assert log["eval"][1] == g_n
        assert abs(log["prompt"][0] - p_ms) < 0.006
        assert abs(log["eval"][0] - g_ms) < 0.006
        assert abs(log["eval"][2] - g_tps) < 0.006
        assert abs(log["prompt"][2] - p_tps) < 0.006


def test_nonces_differ_and_no_cache_hits(llama_server, tmp_path):
    store = open_store(tmp_path / "n.db")
    camp = parse_campaign(campaign_text(llama_server.url, models=("tiny-a",), classes=("short",), reps=4), "n.toml")
    outcome = run_campaign(store, camp, echo=lambda s: None)
    assert outcome.exit_code == 0 and outcome.measured == 4
    rows = list(store.db.query("select nonce, cached_tokens, request_json, response_json, counter_source from samples"))
    assert len({r["nonce"] for r in rows}) == 4
    assert all(r["cached_tokens"] == 0 for r in rows)
    assert all('"cache_prompt":false' in r["request_json"] for r in rows)
    assert all(r["counter_source"] == "timings" for r in rows)
    # the run row carries the runner's own verdict
    run = store.db["runs"].get(outcome.run_id)
    assert (run["status"], run["exit_code"], run["coverage"]) == ("completed", 0, 1.0)
    campaign = store.db["campaigns"].get(run["campaign_id"])
    assert campaign["sha256"] == camp.sha256 and campaign["toml_text"] == camp.text


def test_router_loads_recorded_including_a_load_inside_a_request(llama_server, tmp_path):
    """A foreign client evicts the model between samples (models-max 1): the
    next measured request has to load it, and the run records that load."""
    url = llama_server.url
    unload_all(url)
    store = open_store(tmp_path / "l.db")
    camp = parse_campaign(
        campaign_text(url, models=("tiny-b", "tiny-a"), classes=("short",), reps=3, pinned="tiny-a"), "l.toml"
    )
    evicted = []

    def echo(line: str) -> None:
        if line.startswith("[1/6] tiny-b") and not evicted:
            response = httpx.post(url + "/models/load", json={"model": "tiny-a"}, timeout=30)
            assert response.status_code == 200, response.text
            evicted.append(wait_states(url, lambda st: st["tiny-a"] == "loaded" and st["tiny-b"] != "loaded"))

    outcome = run_campaign(store, camp, echo=echo)
    assert outcome.exit_code == 0
    assert evicted and evicted[0]["tiny-b"] != "loaded"
    loads = list(
        store.db.query(
            "select loads.*, models.name from loads join models on models.id = model_id order by loads.id"
        )
    )
    explicit = [(ld["name"], ld["trigger"]) for ld in loads if ld["trigger"] == "explicit"]
    assert explicit == [("tiny-b", "explicit"), ("tiny-a", "explicit")]  # pinned model last
    inside = [ld for ld in loads if ld["trigger"] == "inside_request"]
    assert len(inside) == 1 and inside[0]["name"] == "tiny-b"
    assert inside[0]["load_seconds"] > 0
    sample = store.db["samples"].get(inside[0]["sample_id"])
    assert sample["repetition"] == 2
    assert all(ld["load_seconds"] and ld["load_seconds"] > 0 for ld in loads)


def test_server_killed_mid_cell_gives_exceptions_and_run_goes_on(fresh_server, tmp_path):
    store = open_store(tmp_path / "k.db")
    camp = parse_campaign(
        campaign_text(fresh_server.url, models=("tiny-b",), classes=("short", "medium"), reps=3), "k.toml"
    )

    def echo(line: str) -> None:
        if line.startswith("[2/6]"):
            fresh_server.kill()

    outcome = run_campaign(store, camp, echo=echo)
    assert outcome.status == "completed"
    assert outcome.exit_code == EXIT_PARTIAL
    assert (outcome.measured, outcome.failed) == (2, 4)
    rows = list(store.db.query("select repetition, error_kind, error_text, decode_tps from samples order by id"))
    assert [r["error_kind"] for r in rows] == [None, None, "connection", "connection", "connection", "connection"]
    assert all(r["decode_tps"] is None for r in rows[2:])
    assert all(r["error_text"] for r in rows[2:])
    run = store.db["runs"].get(outcome.run_id)
    assert run["coverage"] == 2 / 6 and run["samples_failed"] == 4 and run["status"] == "completed"


def test_unreachable_server_fails_the_run_with_reason(tmp_path):
    from cardproof.daemon.server.llamacpp import free_port

    url = f"http://127.0.0.1:{free_port()}"
    camp = tmp_path / "u.toml"
    camp.write_text(campaign_text(url))
    db = tmp_path / "u.db"
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert result.exit_code == EXIT_FAILED
    assert f"server {url} not reachable" in result.output
    run = sqlite3.connect(db).execute("select status, exit_code, error_text from runs").fetchone()
    assert run[0] == "failed" and run[1] == EXIT_FAILED and "not reachable" in run[2]
