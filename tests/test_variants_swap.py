"""llama-swap variants: a config generated for the run from the user's, served by a llama-swap of cardproof's own.

No llama-swap binary is installed here (tests/fixtures/llamaswap/README.md). The campaign's server is
the RECORDED llama-swap of tests/recorded_servers.py; the binary cardproof starts for the variants is a
STAND-IN: a script that serves the same recorded shapes on the address it is given, for the models of
the config it is given, and keeps that config where the test can read it. What is checked is what
cardproof writes and asks; no upstream llama-server runs, so no log proves an argument here.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.run.variants.swap import generated_config, variant_entry
from recorded_servers import RecordedLlamaSwap

USER_CONFIG = {
    "macros": {"llama-server": "/opt/llama/llama-server --host 127.0.0.1"},
    "healthCheckTimeout": 300,
    "models": {
        "qwen": {"cmd": "${llama-server} --port ${PORT} -m /models/qwen.gguf -c 8192 --threads 8 -ngl 99",
                 "ttl": 300, "aliases": ["gpt-4o-mini"]},
        "gemma": {"cmd": "${llama-server} --port ${PORT} -m /models/gemma.gguf"},
    },
}

STAND_IN = '''
import argparse, shutil, sys
sys.path.insert(0, {tests!r})
from http.server import ThreadingHTTPServer
import yaml
from recorded_servers import RecordedLlamaSwap, _Handler
p = argparse.ArgumentParser()
p.add_argument("--config"); p.add_argument("--listen")
a = p.parse_args()
shutil.copy(a.config, {keep!r})
host, port = a.listen.rsplit(":", 1)
srv = RecordedLlamaSwap(models=list(yaml.safe_load(open(a.config))["models"]))
srv.httpd.server_close()
srv.httpd = ThreadingHTTPServer((host, int(port)), _Handler)
srv.httpd.app = srv
print("llama-swap stand-in listening on", a.listen, flush=True)
srv.httpd.serve_forever()
'''


def _campaign(url: str, config: Path) -> str:
    return f"""
[campaign]
name = "swap-variants"
prompt_classes = ["short"]
repetitions = 2
max_tokens = 8

[server]
backend = "llama-swap"
url = "{url}"

[[models]]
name = "qwen"

[variants]
threads = [2]
llama_swap_config = "{config}"

[variants.sets]
kv8 = ["-ctk", "q8_0", "-ctv", "q8_0"]
"""


def test_a_variants_entry_is_the_bases_with_its_arguments_merged_into_the_cmd():
    entry = variant_entry(USER_CONFIG, "qwen", ("-t", "2", "-ngl", "20"))
    assert entry["cmd"] == ("'${llama-server}' --port '${PORT}' -m /models/qwen.gguf -c 8192 -t 2 -ngl 20 "
                            "--log-verbosity 4 --log-colors off")
    assert entry["ttl"] == 300 and "aliases" not in entry  # the base's names stay the base's
    out = generated_config(USER_CONFIG, {"qwen~t2": entry})
    assert out["macros"] == USER_CONFIG["macros"] and list(out["models"]) == ["qwen~t2"]
    # what llama-swap reads back: the shell words, macros and ${PORT} unchanged
    assert yaml.safe_load(yaml.safe_dump(out))["models"]["qwen~t2"]["cmd"].startswith("'${llama-server}'")


def test_llama_swap_variants_need_the_users_config_and_only_llama_swap_reads_one(tmp_path):
    text = _campaign("http://127.0.0.1:9", tmp_path / "c.yaml")
    with pytest.raises(CampaignError, match="variants.llama_swap_config.*name your llama-swap config"):
        parse_campaign(text.replace(f'llama_swap_config = "{tmp_path / "c.yaml"}"\n', ""))
    with pytest.raises(CampaignError, match="only the llama-swap backend reads it"):
        parse_campaign(text.replace('backend = "llama-swap"', 'backend = "llama-server"'))


def test_recorded_llama_swap_variants_run_through_a_stand_in_of_cardproofs_own(tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(USER_CONFIG))
    kept = tmp_path / "generated.yaml"
    binary = tmp_path / "llama-swap"
    binary.write_text(f"#!{sys.executable}\n" + STAND_IN.format(tests=str(Path(__file__).parent), keep=str(kept)))
    binary.chmod(0o755)
    monkeypatch.setenv("CARDPROOF_LLAMA_SWAP", str(binary))
    with RecordedLlamaSwap(models=("qwen",)) as srv:
        store = open_store(tmp_path / "s.db")
        out = run_campaign(store, parse_campaign(_campaign(srv.url, config)), echo=lambda s: None)
        campaign_requests = list(srv.requests)
    assert out.status == "completed" and out.measured == out.planned == 2 + 2 * 2
    generated = yaml.safe_load(kept.read_text())
    assert set(generated["models"]) == {"qwen~kv8", "qwen~t2"}
    t2 = generated["models"]["qwen~t2"]["cmd"]
    assert "--threads 2" in t2 and t2.count("--threads") == 1  # the base's --threads 8 replaced, not repeated
    assert "-ctk q8_0 -ctv q8_0" in generated["models"]["qwen~kv8"]["cmd"] and "--threads 8" in generated[
        "models"]["qwen~kv8"]["cmd"]
    # the user's llama-swap was asked to let the model go, never for a variant
    assert not any("~" in (b or {}).get("model", "") for _, _, b, _ in campaign_requests if isinstance(b, dict))
    conn = sqlite3.connect(tmp_path / "s.db")
    rows = conn.execute("select name, server_kind, base_args_source, status from variants order by position").fetchall()
    assert rows == [("kv8", "llama-swap", "llama-swap config", "no_log"), ("t2", "llama-swap", "llama-swap config",
                                                                            "no_log")]
    store.close()


def test_without_a_llama_swap_binary_the_variants_are_not_loaded_and_say_why(tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(USER_CONFIG))
    monkeypatch.setenv("CARDPROOF_LLAMA_SWAP", str(tmp_path / "absent"))
    with RecordedLlamaSwap(models=("qwen",)) as srv:
        store = open_store(tmp_path / "s.db")
        out = run_campaign(store, parse_campaign(_campaign(srv.url, config)), echo=lambda s: None)
    assert out.measured == 2 and out.failed == 4
    conn = sqlite3.connect(tmp_path / "s.db")
    texts = {t for (t,) in conn.execute("select error_text from samples where error_kind = 'variant_not_loaded'")}
    assert len(texts) == 1 and "no llama-swap binary" in texts.pop()
    store.close()
