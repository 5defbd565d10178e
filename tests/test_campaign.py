"""Campaign validation: every bad file names its key, exits 2, writes nothing."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import CampaignError, parse_campaign

GOOD = """
[campaign]
name = "ok"
repetitions = 4
reasoning = [false, true]

[server]
url = "http://127.0.0.1:9"

[[models]]
name = "a"

[[models]]
name = "b"
pinned = true
"""


def test_good_campaign_parses_with_defaults():
    c = parse_campaign(GOOD, "good.toml")
    assert c.repetitions == 4
    assert c.repetitions_reasoning == 3  # the documented default with reasoning on
    assert c.prompt_classes == ("short", "medium", "long")
    assert c.prompt_tokens["long"] == 4800
    assert [m.name for m in c.models] == ["a", "b"]
    assert c.models[1].pinned
    assert len(c.sha256) == 64


@pytest.mark.parametrize(
    "old,new,key",
    [
        ("repetitions = 4", 'repetitions = "five"', "campaign.repetitions"),
        ("repetitions = 4", "repetitions = 0", "campaign.repetitions"),
        ('url = "http://127.0.0.1:9"', 'url = "127.0.0.1:9"', "server.url"),
        ('url = "http://127.0.0.1:9"', 'url = "http://x"\nbackend = "vllm-magic"', "server.backend"),
        ('name = "ok"', 'name = "ok"\nrepetition = 3', "campaign.repetition"),
        ("reasoning = [false, true]", 'reasoning = "yes"', "campaign.reasoning"),
        ("reasoning = [false, true]", 'prompt_classes = ["huge"]', "campaign.prompt_classes[0]"),
        ('name = "b"\npinned = true', 'name = "a"', "models[1].name"),
        ("pinned = true", 'pinned = "yes"', "models[1].pinned"),
        ('name = "b"\npinned = true', 'name = "b"\npinned = true\n[gates.load_secs]\nthreshold = 1', "gates.load_secs"),
        ('name = "b"\npinned = true', 'name = "b"\npinned = true\n[gates.load_time]\nthreshold = "slow"', "gates.load_time.threshold"),
        ('name = "b"\npinned = true', 'name = "b"\npinned = true\n[gates.length_limit]\nexclude = "no"', "gates.length_limit.exclude"),
        ('name = "b"\npinned = true', 'name = "b"\npinned = true\n[gates.length_limit]\nmax = 3', "gates.length_limit.max"),
        ('name = "ok"', 'name = "ok"\ncanaries = 1', "campaign.canaries"),
        ('name = "b"\npinned = true', 'name = "b"\npinned = true\n[embedding]\nurl = "localhost:1"', "embedding.url"),
    ],
)
def test_bad_campaign_names_the_key(old, new, key):
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    with pytest.raises(CampaignError) as err:
        parse_campaign(text, "bad.toml")
    assert f"key '{key}'" in str(err.value)
    assert str(err.value).startswith("bad.toml: ")


def test_missing_server_and_models():
    with pytest.raises(CampaignError, match="key 'server'"):
        parse_campaign('[campaign]\nname="x"\n[[models]]\nname="a"\n', "x.toml")
    with pytest.raises(CampaignError, match="key 'models'"):
        parse_campaign('[server]\nurl="http://127.0.0.1:1"\n', "x.toml")


def test_broken_toml_is_one_line_error():
    with pytest.raises(CampaignError) as err:
        parse_campaign("[server\nurl=", "broken.toml")
    assert "not valid TOML" in str(err.value)


def test_cli_exits_2_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("repetitions = 4", "repetitions = -1"))
    db = tmp_path / "store.db"
    result = CliRunner().invoke(cli, ["run", str(bad), "--db", str(db)])
    assert result.exit_code == 2
    assert f"{bad}: key 'campaign.repetitions'" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not db.exists()


def test_cli_invalid_campaign_leaves_existing_db_untouched(tmp_path):
    from cardproof.daemon.store import open_store

    db = tmp_path / "store.db"
    store = open_store(db)
    store.insert("campaigns", {"name": "kept", "sha256": "x", "toml_text": "", "registered_at": "t"})
    store.close()
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('name = "a"', "name = 7"))
    result = CliRunner().invoke(cli, ["run", str(bad), "--db", str(db)])
    assert result.exit_code == 2
    assert "models[0].name" in result.output
    rows = sqlite3.connect(db).execute("select name from campaigns").fetchall()
    assert rows == [("kept",)]


def test_cli_missing_campaign_file(tmp_path):
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "nope.toml"), "--db", str(tmp_path / "d.db")])
    assert result.exit_code == 2
    assert "nope.toml" in result.output and "cannot read file" in result.output


def test_every_command_has_help():
    import click

    def walk(cmd, path):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])

    for path, cmd in walk(cli, ["cardproof"]):
        assert (cmd.help or "").strip(), f"{' '.join(path)} has no help text"
