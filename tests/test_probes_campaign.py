"""[probes] and [rules] in a campaign: defaults, and every bad entry names its key and exits 2."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import CampaignError, parse_campaign

BASE = """
[campaign]
name = "p"
prompt_classes = ["short"]

[server]
url = "http://127.0.0.1:9"

[[models]]
name = "cand"

[[models]]
name = "prod"
pinned = true
"""


def test_no_probes_no_rules_by_default():
    c = parse_campaign(BASE)
    assert c.probes is None and c.rules == {}


def test_probes_defaults_and_rules_kept_verbatim():
    rule = 'offloaded_layers == total_layers and probe.tools == "PASS" and decode.short >= 50'
    c = parse_campaign(BASE + f"\n[probes]\n\n[rules]\nfits = '{rule}'\n")
    assert c.probes.run == ("tools", "thinking", "reasoning", "coding", "vision")
    assert (c.probes.repeat, c.probes.max_tokens, c.probes.reasoning) == (2, 1024, False)
    assert c.rules == {"fits": rule}
    assert rule in c.text  # the rule is part of the frozen text and its SHA-256


@pytest.mark.parametrize("extra, key, fragment", [
    ('[probes]\nrun = ["tools", "poetry"]', "probes.run[1]", "unknown probe 'poetry'"),
    ("[probes]\nrun = []", "probes.run", "non-empty list"),
    ("[probes]\nrepeat = 0", "probes.repeat", "integer from 1 to 100,"),
    ("[probes]\nmax_tokens = -5", "probes.max_tokens", "integer from 1 to 1,000,000,"),
    ('[probes]\nreasoning = "yes"', "probes.reasoning", "true or false"),
    ("[probes]\ncode_timeout_s = 0", "probes.code_timeout_s", "above 0"),
    ("[probes]\ntemperature = 0.7", "probes.temperature", "unknown key"),
    ("[rules]\nfits = 5", "rules.fits", "non-empty string"),
    ('[rules]\nfits = "decode.short = 50"', "rules.fits", "'=' is not a comparison"),
    ('[rules]\nfits = "decode.short >= fifty"', "rules.fits", "unknown name 'fifty'"),
    ('[rules]\nfits = \'probe.tools == "PASS"\'', "rules.fits", "probe 'tools' is not run by this campaign"),
    ('[probes]\nrun = ["coding"]\n[rules]\nfits = \'probe.tools == "PASS"\'', "rules.fits", "its [probes] run: coding"),
    ('[probes]\n[rules]\nfits = \'probe.coding == "PASSES"\'', "rules.fits", "is not a verdict"),
    ("[rules]\nfits = 'decode.long >= 10'", "rules.fits", "prompt class 'long' is not measured"),
])
def test_bad_probes_and_rules_name_their_key(extra, key, fragment):
    with pytest.raises(CampaignError) as exc:
        parse_campaign(BASE + "\n" + extra + "\n", "c.toml")
    assert exc.value.key == key
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_rules_must_be_a_table():
    with pytest.raises(CampaignError) as exc:
        parse_campaign("rules = 3\n" + BASE, "c.toml")
    assert exc.value.key == "rules" and "expected a table" in str(exc.value)


def test_cli_exits_2_and_writes_nothing(tmp_path):
    camp = tmp_path / "c.toml"
    camp.write_text(BASE + '\n[rules]\nfits = "decode.short >= 50 and"\n')
    db = tmp_path / "c.db"
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert result.exit_code == 2
    assert "key 'rules.fits'" in result.output and "column" in result.output
    assert not db.exists()


def test_rules_check_command(tmp_path):
    ok = CliRunner().invoke(cli, ["rules", "check", 'decode.short >= 50 and probe.tools == "PASS"'])
    assert ok.exit_code == 0 and "arm 2: probe.tools" in ok.output
    bad = CliRunner().invoke(cli, ["rules", "check", "__import__('os').system('id')"])
    assert bad.exit_code == 2 and "error:" in bad.output
    camp = tmp_path / "c.toml"
    camp.write_text(BASE + '\n[probes]\nrun = ["coding"]\n')
    narrowed = CliRunner().invoke(cli, ["rules", "check", "--campaign", str(camp), 'probe.tools == "PASS"'])
    assert narrowed.exit_code == 2 and "not run by this campaign" in narrowed.output
