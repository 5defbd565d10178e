"""One validation layer (pydantic models declared with the checks of daemon/campaign/validate.py).

The campaign and the daemon config are read by models with ``extra="forbid"``;
these tests check the layer itself: nothing is coerced (a string is not a
number, 1 is not true), every unknown key is refused where it stands, and
the refusal is one line naming the file and the dotted key.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.service.config import ConfigError, parse_config

DEFAULTS = {"default_db": "/tmp/never.db", "default_data_dir": "/tmp"}


@pytest.mark.parametrize("text,key,fragment", [
    ('[metrics]\nport = "9464"\n', "metrics.port", "expected an integer from 0 to 65,535, got str '9464'"),
    ("[collectors]\nnvml = 1\n", "collectors.nvml", "expected true or false, got int 1"),
    ("[daemon]\ntick_s = \"1\"\n", "daemon.tick_s", "expected a finite number"),
    ('[quiet]\nown_clients = "::1"\n', "quiet.own_clients", "expected a list of at most 1000 strings"),
    ("[quiet]\nown_clients = [1]\n", "quiet.own_clients[0]", "expected an IP address, got int 1"),
    ("[collectors]\nlog_files = [[\"/a\"]]\n", "collectors.log_files[0]", "expected a file path, got list"),
    ("[retention]\nkeep = true\n", "retention.keep", "unknown key (expected one of: interval_h,"),
    ("metrics = 3\n", "metrics", "expected a table, got int 3"),
    ("[metrics.extra]\n", "metrics.extra", "unknown key"),
    ("[daemon]\ntick_s = 2\nheartbeat_s = 1\n", "daemon.heartbeat_s", "must be at least tick_s (2)"),
    ("[metrics]\nbind = \"::1\"\nport = -1\n", "metrics.port", "expected an integer from 0 to 65,535, got int -1"),
])
def test_config_values_are_not_coerced_and_unknown_keys_are_refused_where_they_stand(text, key, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config(text, "d.toml", **DEFAULTS)
    assert err.value.key == key, str(err.value)
    assert str(err.value).startswith(f"d.toml: key '{key}': ") and fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_config_sections_are_typed_and_read_only():
    cfg = parse_config('[quiet]\nown_clients = ["10.0.0.1"]\n[collectors]\nlog_files = ["/var/log/a.log"]\n',
                       "d.toml", **DEFAULTS)
    assert cfg.quiet.own_clients == ("10.0.0.1",) and cfg.collectors.log_files == ("/var/log/a.log",)
    assert cfg.metrics.port == 9464 and cfg.collectors.nvml is True
    with pytest.raises(Exception):  # frozen: a running daemon's settings are what the file said
        cfg.quiet.poll_s = 0.0


# -- the campaign: tables registered in one place -----------------------------------------------------
from cardproof.daemon.campaign import tables as campaign_schema  # noqa: E402
from cardproof.daemon.campaign.model import CampaignError, parse_campaign  # noqa: E402
from cardproof.daemon.campaign.schema import Section, Table  # noqa: E402
from cardproof.daemon.campaign.validate import Int  # noqa: E402

BASE = '[server]\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "a"\n'


class _Soak(Section):
    minutes: Int(1, 60) = 5


@pytest.fixture
def sections(monkeypatch):
    """The table registry as it is, restored after the test."""
    monkeypatch.setattr(campaign_schema, "SECTIONS", dict(campaign_schema.SECTIONS))
    campaign_schema._model_cache.clear()
    yield campaign_schema
    campaign_schema._model_cache.clear()


def test_a_table_is_refused_until_registered_then_read_as_its_model(sections):
    with pytest.raises(CampaignError) as err:
        parse_campaign(BASE + "[soak]\nminutes = 9\n", "c.toml")
    assert err.value.key == "soak" and "unknown key" in str(err.value)
    sections.add_table(Table("soak", _Soak, _Soak()))  # as a module of campaign/tables/ declaring it
    assert parse_campaign(BASE + "[soak]\nminutes = 9\n", "c.toml").sections["soak"] == _Soak(minutes=9)
    assert parse_campaign(BASE, "c.toml").sections["soak"] == _Soak()
    for text, key in (("[soak]\nminutes = 61\n", "soak.minutes"), ("[soak]\nhours = 1\n", "soak.hours"),
                      ("soak = 1\n", "soak")):
        with pytest.raises(CampaignError) as err:
            parse_campaign(text + BASE, "c.toml")
        assert err.value.key == key, str(err.value)


def test_a_built_in_table_cannot_be_registered_again(sections):
    with pytest.raises(ValueError, match="built-in"):
        sections.add_table(Table("server", _Soak))
    for name in ("model_config", "copy", "soak-test"):  # pydantic's own names; not a field name
        with pytest.raises(ValueError, match="cannot be a campaign table name"):
            sections.add_table(Table(name, _Soak))


@pytest.mark.parametrize("text,key,fragment", [
    ('[server]\nurl = "http://127.0.0.1:9"\nmodels = [3]\n', "server.models", "unknown key"),
    ('models = [3]\n[server]\nurl = "http://127.0.0.1:9"\n', "models[0]", "expected a table, got int 3"),
    ('models = [{name = "a"}, {name = "a", pinned = true}]\n[server]\nurl = "http://127.0.0.1:9"\n',
     "models[1].name", "duplicate model name 'a'"),
    ("prompts = 3\n" + BASE, "prompts", "expected a table, got int 3"),
    (BASE + "[prompts.x]\ntarget_tokens = \"10\"\n", "prompts.x.target_tokens", "got str '10'"),
    (BASE + "[gates]\nload_time = 3\n", "gates.load_time", "expected a table, got int 3"),
    (BASE + '[rules]\n"[key]" = 3\n', "rules.[key]", "non-empty string"),
    (BASE + "[campaign]\nreasoning = [true, 1]\n", "campaign.reasoning", "true, false or a list of them"),
    (BASE + "[campaign]\nprompt_classes = [\"short\", \"huge\"]\n", "campaign.prompt_classes[1]",
     "unknown prompt class 'huge'"),
    (BASE + "[embedding]\nmodel = \"e\"\n", "embedding.url", "missing (expected an http:// or https:// URL)"),
    ('[server]\nbackend = "openai"\nnum_ctx = 1\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "a"\n',
     "server.num_ctx", "only the ollama backend takes num_ctx"),
    ("[server]\n[[models]]\nname = \"a\"\n", "server.url", "missing (expected an http:// or https:// URL)"),
])
def test_campaign_problems_name_the_exact_key(text, key, fragment):
    with pytest.raises(CampaignError) as err:
        parse_campaign(text, "c.toml")
    assert err.value.key == key, str(err.value)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_parsed_tables_are_read_only():
    c = parse_campaign(BASE + "[probes]\nrun = [\"coding\"]\n", "c.toml")
    with pytest.raises(Exception):
        c.models[0].pinned = True
    with pytest.raises(Exception):
        c.probes.repeat = 100
