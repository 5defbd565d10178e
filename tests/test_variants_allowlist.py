"""A campaign's variant arguments are an allow-list: the tuning arguments the load's log proves, nothing else.

llama-server's other options read and write the machine's files (``--path /`` served /etc/hostname,
``--log_file`` overwrote a file), reach the network or add tools; ``--api_key`` locked cardproof out of
its own variant server and ended the run in a traceback. Each is refused when the campaign is read, by
every command that reads one and by the daemon's worker, as one line naming file, key and reason.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.service import queue
from cardproof.daemon.service.config import parse_config
from cardproof.daemon.service.progress import Progress
from cardproof.daemon.service.worker import execute
from cardproof.daemon.store import open_store, utcnow

GENERIC = "is not a tuning argument cardproof proves from the load's log"


def campaign(variants: str, *, backend: str = "llama-server") -> str:
    return f"""
[campaign]
name = "v"
prompt_classes = ["short"]
repetitions = 1
max_tokens = 8

[server]
backend = "{backend}"
url = "http://127.0.0.1:9"

[[models]]
name = "a"

[variants]
{variants}
"""


def a_set(args: str) -> str:
    return f"[variants.sets]\nx = {args}\n"


def refused(text: str) -> str:
    with pytest.raises(CampaignError) as err:
        parse_campaign(text, "c.toml")
    return str(err.value)


@pytest.mark.parametrize("args, index, why", [
    ('["--log_file", "victim.txt"]', 0, "variant's evidence"),
    ('["--path", "/"]', 0, GENERIC),
    ('["--tools", "all"]', 0, GENERIC),
    ('["--media-path", "/"]', 0, GENERIC),
    ('["--chat-template-file", "/etc/shadow"]', 0, GENERIC),
    ('["--model-draft", "/etc/passwd"]', 0, GENERIC),
    ('["--slot-save-path", "/tmp"]', 0, GENERIC),
    ('["--mcp-servers-json", "servers.json"]', 0, GENERIC),
    ('["-hfr", "someone/model-GGUF"]', 0, GENERIC),
    ('["--hf_repo", "someone/model-GGUF"]', 0, "set by cardproof"),
    ('["-dr", "someone/draft"]', 0, GENERIC),
    ('["--rpc", "10.0.0.1:50052"]', 0, GENERIC),
    ('["--cors-origins", "*"]', 0, GENERIC),
    ('["--no-such-flag"]', 0, GENERIC),
    ('["--api_key", "k"]', 0, "refuse cardproof's own requests"),
    ('["--api-key-file", "/etc/passwd"]', 0, "refuse cardproof's own requests"),
    ('["-ctk", "q8_0", "--threads", "-1"]', 2, "whole number from 1 to 4,096, got '-1'"),
    ('["-ctk", "q8_0", "--threads=-1"]', 2, "whole number from 1 to 4,096, got '-1'"),
    ('["-t", "1", "--path=/"]', 2, GENERIC),
])
def test_every_argument_off_the_allow_list_is_refused_in_one_line_naming_file_key_and_reason(args, index, why):
    message = refused(campaign(a_set(args)))
    assert message.startswith(f"c.toml: key 'variants.sets.x[{index}]': "), message
    assert why in message and "\n" not in message, message


@pytest.mark.parametrize("args, index, why", [
    ('["-np", "-1"]', 0, "from 1 to 1,024"),  # llama-server's auto: the log would state its choice, not ours
    ('["-ngl", "-1"]', 0, "(or auto or all)"),
    ('["-tb", "0"]', 0, "from 1 to 4,096"),
    ('["-c", "-5"]', 0, "from 0 to 16,777,216"),
    ('["-ub", "٣"]', 0, "whole number"),  # int() reads other scripts' digits; llama-server does not
    ('["-ot", "exps=CPU=x"]', 0, "PATTERN=BUFFER_TYPE"),
    ('["-ot", "(exps=CPU"]', 0, "no regular expression"),
    ('["-t", "1", "--threads", "2"]', 2, "sets threads again"),
    ('["-t=4"]', 0, GENERIC),  # llama-server splits no '=' after a short flag
])
def test_a_tuning_argument_with_a_value_out_of_its_range_is_refused(args, index, why):
    message = refused(campaign(a_set(args)))
    assert message.startswith(f"c.toml: key 'variants.sets.x[{index}]': ") and why in message, message


def test_every_spelling_llama_server_takes_is_accepted_and_given_on_in_its_own_form():
    camp = parse_campaign(campaign(a_set(
        '["--n_gpu_layers=5", "--threads=2", "--cache_type_k", "q8_0", "-ctv", "q8_0", "--flash_attn=on", '
        '"-np", "2", "--ctx_size", "4096", "--override_tensor=exps=CPU", "-ot", "ffn_up=CPU", "--cpu_moe"]')),
        "c.toml")
    (variant,) = camp.sections["variants"].variants()
    assert variant.args == ("--n-gpu-layers", "5", "--threads", "2", "--cache-type-k", "q8_0", "-ctv", "q8_0",
                            "--flash-attn", "on", "-np", "2", "--ctx-size", "4096", "--override-tensor",
                            "exps=CPU", "-ot", "ffn_up=CPU", "--cpu-moe")


def test_the_axes_meet_the_same_allow_list_and_the_demo_campaign_passes():
    camp = parse_campaign(campaign('threads = [1, 2]\nctx_size = [4096]\nn_cpu_moe = [0]'), "c.toml")
    assert [v.args[:2] for v in camp.sections["variants"].variants()] == [("--threads", "1"), ("--threads", "2")]
    assert "'variants.threads[0]'" in refused(campaign("threads = [-1]"))
    from cardproof.demo import REAL_CAMPAIGN  # the demo's campaign with variants
    demo = parse_campaign(REAL_CAMPAIGN.format(url="http://127.0.0.1:9", log_file="/tmp/none.log", embedding=""),
                          "demo-campaign.toml")
    assert [v.args for v in demo.sections["variants"].variants()] == [
        ("--threads", "1"), ("--cache-type-k", "q8_0", "--cache-type-v", "q8_0")]
    # the example file's commented [variants] table, as a reader would uncomment it
    example = (Path(__file__).parents[1] / "data" / "campaigns" / "example.toml").read_text()
    lines = example.splitlines()
    start = lines.index("# [variants]")
    table = [ln[2:].split("  #")[0] for ln in lines[start:start + 11] if ln.startswith("# ")
             and "llama_swap_config" not in ln]
    parsed = parse_campaign(example + "\n" + "\n".join(table) + "\n", "example.toml")
    assert [v.name for v in parsed.sections["variants"].variants()] == [
        "fa", "kv8", "t4_kvf16", "t4_kvq8_0", "t8_kvf16", "t8_kvq8_0"]


def test_ollama_refuses_parallel_slots_with_the_reason():
    message = refused(campaign(a_set('["-np", "2"]'), backend="ollama"))
    assert "'variants.sets.x'" in message and "OLLAMA_NUM_PARALLEL" in message, message


def _counts(db) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"select count(*) from {t}").fetchone()[0]
                for t in ("runs", "campaigns", "registrations", "daemon_queue")}
    finally:
        conn.close()


@pytest.mark.parametrize("command", [["run"], ["register"], ["queue", "add"], ["run", "--via-daemon"]])
def test_every_command_that_reads_a_campaign_exits_2_and_stores_nothing(tmp_path, command):
    db = tmp_path / "c.db"
    kept = tmp_path / "kept.toml"
    kept.write_text(campaign(a_set('["-t", "1"]')))
    ok = CliRunner().invoke(cli, ["register", str(kept), "--db", str(db)])
    assert ok.exit_code == 0, ok.output
    bad = tmp_path / "bad.toml"
    bad.write_text(campaign(a_set('["-t", "1", "--api_key", "k"]')))
    result = CliRunner().invoke(cli, [*command, str(bad), "--db", str(db)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines == [f"error: {bad}: key 'variants.sets.x[2]': '--api_key' would make the variant's server refuse "
                     "cardproof's own requests"], result.output
    assert _counts(db) == {"runs": 0, "campaigns": 0, "registrations": 1, "daemon_queue": 0}


def test_the_daemon_worker_refuses_a_queued_campaign_off_the_allow_list(tmp_path):
    """An entry queued before the allow-list (by an older cardproof) is parsed again, and fails unrun."""
    db = tmp_path / "q.db"
    store = open_store(db)
    text = campaign(a_set('["--path", "/"]'))
    store.insert("daemon_queue", {"campaign_path": str(tmp_path / "old.toml"), "campaign_name": "v",
                                  "campaign_sha256": "0" * 64, "campaign_text": text, "enqueued_at": utcnow(),
                                  "enqueued_by": "test", "status": "queued", "attempts": 0})
    entry = queue.claim_next(store)
    cfg = parse_config(f'[daemon]\ndb = "{db}"\n', "d.toml", default_db=db, default_data_dir=tmp_path)
    result = execute(db, entry, cfg, Progress(), daemon_id=1)
    row = store.db["daemon_queue"].get(entry.id)
    assert result.status == "failed" and row["status"] == "failed", row
    assert row["reason"].startswith(f"campaign no longer valid: {tmp_path / 'old.toml'}: key "
                                    f"'variants.sets.x[0]': '--path' {GENERIC}"), row["reason"]
    assert store.db["runs"].count == 0
    store.close()


def test_a_variant_server_that_refuses_cardproofs_requests_ends_in_recorded_failures(tiny_models, tmp_path):
    """The allow-list keeps --api-key out; were a variant's server to refuse anyway (or die under the first
    request), its samples are stored as failed and the run completes, never left 'running' by a traceback."""
    from cardproof.daemon.server import llamacpp
    from cardproof.daemon.run.runner import EXIT_PARTIAL, run_campaign
    from conftest import campaign_text

    server = llamacpp.LlamaServerProcess(["-m", str(tiny_models["tiny-b"]), "-c", "2048", "--parallel", "1"],
                                         log_path=tmp_path / "single.log").start()
    try:
        camp = parse_campaign(campaign_text(server.url, models=("tiny-b",), reps=1) + a_set('["-t", "1"]'))
        # past the campaign check, as no campaign file can put it: the variant's server answers 401
        camp.sections["variants"].sets["x"] = ("--api-key", "k")
        store = open_store(tmp_path / "v.db")
        outcome = run_campaign(store, camp, echo=lambda line: None)
        store.close()
    finally:
        server.stop()
    assert (outcome.status, outcome.exit_code, outcome.measured, outcome.failed) == ("completed", EXIT_PARTIAL, 1, 1)
    conn = sqlite3.connect(tmp_path / "v.db")
    assert conn.execute("select status from runs").fetchall() == [("completed",)]
    assert conn.execute("select s.error_kind, s.error_text like '%401%' from samples s join cells c on "
                        "c.id = s.cell_id join models m on m.id = c.model_id where m.name = 'tiny-b~x'"
                        ).fetchall() == [("http", 1)]
