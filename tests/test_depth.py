"""Context-depth steps (``[depth]``) against the real llama-server (``--parallel 4``, 1,024 tokens per slot)."""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.load.depth import refusal
from cardproof.daemon.store.stats import run_steps
from cardproof.daemon.run.load.steps import ServerShape
from cardproof.daemon.run.runner import EXIT_PARTIAL, run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from test_load_sweep import parallel_server  # noqa: F401 -- the shared --parallel 4 server fixture


def depth_text(url: str, tokens, reps: int = 2, max_tokens: int = 8) -> str:
    return campaign_text(url, reps=1) + f"\n[depth]\ntokens = {list(tokens)}\nrepetitions = {reps}\nmax_tokens = {max_tokens}\n"


def test_depth_steps_store_the_servers_prompt_count_and_refuse_beyond_n_ctx(parallel_server, tmp_path):  # noqa: F811
    db = tmp_path / "d.db"
    store = open_store(db)
    lines: list[str] = []
    out = run_campaign(store, parse_campaign(depth_text(parallel_server.url, [0, 300, 900, 5000])), echo=lines.append)
    store.close()
    # refused samples are planned and not measured: the run is partial, never crashed
    assert out.status == "completed" and out.exit_code == EXIT_PARTIAL
    conn = sqlite3.connect(db)
    steps = conn.execute("select depth_tokens, n_ctx, refused_reason, cell_id from load_steps "
                         "where axis = 'depth' order by position").fetchall()
    assert [s[0] for s in steps] == [0, 300, 900, 5000]
    assert {s[1] for s in steps} == {1024}  # per slot, from /props
    assert [s[2] is None for s in steps] == [True, True, True, False]
    assert "5,000" in steps[3][2] and "1,024" in steps[3][2]
    assert any("depth tiny-a 5000 tokens: refused: " in line for line in lines)
    refused = conn.execute("select count(*), min(error_kind), min(error_text) from samples where cell_id = ?",
                           [steps[3][3]]).fetchone()
    assert refused == (2, "refused", steps[3][2])  # no request sent, each planned sample says why
    figures = {f.step["depth_tokens"]: f for f in run_steps(conn, out.run_id, "depth")}
    prompt_n = {d: f.prompt_tokens.p50 for d, f in figures.items() if d != 5000}
    # the server's own count is stored; it follows the depth asked for, but is the tokenizer's, not ours
    assert prompt_n[0] < 100 < prompt_n[300] < prompt_n[900] <= 1024
    assert abs(prompt_n[900] - 900) < 0.25 * 900
    for d in (0, 300, 900):
        assert figures[d].errors == 0 and figures[d].decode_tps.n == 2 and figures[d].prefill_tps.p50 > 0


def test_refusal_reason_names_both_figures():
    assert refusal(100, 8, ServerShape(4, 1024)) is None
    assert refusal(1016, 8, ServerShape(4, 1024)) is None  # exactly full fits
    why = refusal(1017, 8, ServerShape(4, 1024)).english()  # a Said: stored as English and structured
    assert "1,017" in why and "1,024" in why and "8 generated" in why
    assert refusal(10 ** 6, 8, ServerShape(None, None)) is None  # unknown context: the server decides


def test_a_bad_depth_table_exits_2_naming_the_key(tmp_path):
    camp = tmp_path / "c.toml"
    camp.write_text(depth_text("http://127.0.0.1:9", [0, 0]))
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(tmp_path / "c.db")])
    assert result.exit_code == 2
    assert "key 'depth.tokens[1]': 0 is listed twice" in result.output
    assert not (tmp_path / "c.db").exists()
