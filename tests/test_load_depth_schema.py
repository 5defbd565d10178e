"""``[load]`` and ``[depth]`` read by their pydantic sections: hostile values refused in one line naming the key.

No server is needed: every case is refused before a run starts (a closed
port stands in for the URL), and the CLI case checks that nothing is stored.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.campaign.check import MAX_NUM_CTX
from cardproof.daemon.campaign.tables.depth import DepthSettings
from cardproof.daemon.campaign.tables.load import LoadSettings, Slo
from cardproof.daemon.campaign.slo import frozen_slo
from conftest import campaign_text

URL = "http://127.0.0.1:9"


def _parse(table: str):
    # the table first: a bare key after [server] would belong to [server]
    return parse_campaign(table + "\n" + campaign_text(URL, max_tokens=8), "c.toml")


HOSTILE = [
    # NaN and infinities
    ("[load]\nstreams = [nan]", "load.streams[0]"),
    ("[load]\nstreams = [1]\n[load.slo]\nper_user_decode_tps = nan", "load.slo.per_user_decode_tps"),
    ("[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = inf", "load.slo.ttft_p90_ms"),
    ("[load]\nstreams = [1]\n[load.slo]\nper_user_decode_tps = -inf", "load.slo.per_user_decode_tps"),
    ("[depth]\ntokens = [0]\nrepetitions = nan", "depth.repetitions"),
    ("[depth]\ntokens = [inf]", "depth.tokens[0]"),
    # huge integers (beyond SQLite's 64 bits, beyond any bound)
    ("[load]\nstreams = [1, 99999999999999999999999]", "load.streams[1]"),
    ("[load]\nstreams = [1]\nrequests_per_stream = 9223372036854775808", "load.requests_per_stream"),
    ("[load]\nstreams = [1]\nmax_tokens = 9223372036854775807", "load.max_tokens"),
    ("[depth]\ntokens = [0]\nrepetitions = 18446744073709551616", "depth.repetitions"),
    ("[depth]\ntokens = [0]\nmax_tokens = 9223372036854775807", "depth.max_tokens"),
    # a bool is not an integer
    ("[load]\nstreams = [true]", "load.streams[0]"),
    ("[load]\nstreams = [1]\nrequests_per_stream = true", "load.requests_per_stream"),
    ("[load]\nstreams = [1]\nmax_tokens = false", "load.max_tokens"),
    ("[depth]\ntokens = [false]", "depth.tokens[0]"),
    ("[depth]\ntokens = [0]\nrepetitions = true", "depth.repetitions"),
    ("[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = true", "load.slo.ttft_p90_ms"),
    # strings where numbers belong, control characters in strings
    ("[load]\nstreams = [\"1\"]", "load.streams[0]"),
    ("[load]\nstreams = [1]\nprompt_class = \"sh\\u0000ort\"", "load.prompt_class"),
    ("[load]\nstreams = [1]\nprompt_class = \"short\\n\"", "load.prompt_class"),
    ("[load]\nstreams = [1]\nprompt_class = \"\\u001b[31mshort\"", "load.prompt_class"),
    ("[load]\nstreams = [1]\nprompt_class = 3", "load.prompt_class"),
    ("[depth]\ntokens = \"0\\u0007\"", "depth.tokens"),
    # unknown keys, at each level
    ("[load]\nstreams = [1]\nStreams = [2]", "load.Streams"),
    ("[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = 5\nttft_p99_ms = 9", "load.slo.ttft_p99_ms"),
    ("[depth]\ntokens = [0]\nrepeats = 2", "depth.repeats"),
    ("[depth]\ntokens = [0]\n\"bad\\u0000key\" = 1", "depth.bad\\x00key"),
    # nested where a value belongs, or too deep
    ("[load]\nstreams = [[1]]", "load.streams[0]"),
    ("[load]\nstreams = [1]\nslo = 5", "load.slo"),
    ("[load]\nstreams = [1]\nslo = [{ttft_p90_ms = 5}]", "load.slo"),
    ("[load]\nstreams = [1]\n[load.slo.deeper]\nx = 1", "load.slo.deeper"),
    ("[depth]\ntokens = " + "[" * 60 + "0" + "]" * 60, "depth.tokens[0]"),
    ("[depth]\ntokens = [0]\nrepetitions = {a = {b = {c = 1}}}", "depth.repetitions"),
    ("depth = [0]", "depth"),
    # missing, empty, too many steps
    ("[load]\nrequests_per_stream = 2", "load.streams"),
    ("[depth]\nrepetitions = 2", "depth.tokens"),
    ("[load]\nstreams = " + str(list(range(1, 34))), "load.streams"),
    ("[depth]\ntokens = []", "depth.tokens"),
    # across tables: an unknown class, a plan that cannot end, a depth with no room for its answer
    ("[load]\nstreams = [1]\nprompt_class = \"medium\"", "load.prompt_class"),  # not in [prompts]? built in: fine
]


@pytest.mark.parametrize("table, key", HOSTILE[:-1])
def test_hostile_load_and_depth_values_are_refused_naming_the_key(table, key):
    with pytest.raises(CampaignError) as err:
        _parse(table)
    message = str(err.value)
    assert message.startswith(f"c.toml: key '{key}': "), message
    assert "\n" not in message and "\x00" not in message and "\x1b" not in message


def test_a_built_in_class_not_measured_by_the_cells_is_still_a_load_class():
    camp = _parse(HOSTILE[-1][0])
    assert camp.load.prompt_class == "medium"


@pytest.mark.parametrize("table, key", [
    ("[load]\nstreams = [1]\nprompt_class = \"huge\"", "load.prompt_class"),
    (f"[depth]\ntokens = [0, {MAX_NUM_CTX - 10}]\nmax_tokens = 11", "depth.tokens[1]"),
    (f"[depth]\ntokens = [{MAX_NUM_CTX - 8 + 1}]", "depth.tokens[0]"),  # the campaign's max_tokens (8) as answer
    ("[load]\nstreams = [256, 255, 254, 253, 252]\nrequests_per_stream = 1000", "load.requests_per_stream"),
])
def test_cross_table_checks_name_the_key(table, key):
    with pytest.raises(CampaignError) as err:
        _parse(table)
    assert str(err.value).startswith(f"c.toml: key '{key}': ")


def test_depth_at_the_largest_context_less_its_answer_is_accepted():
    camp = _parse(f"[depth]\ntokens = [0, {MAX_NUM_CTX - 10}]\nmax_tokens = 10")
    assert camp.depth.tokens == (0, MAX_NUM_CTX - 10)


def test_campaign_load_and_depth_are_typed_with_the_campaigns_defaults_filled_in():
    camp = _parse("[load]\nstreams = [4, 1]\n[load.slo]\nttft_p90_ms = 500\n\n[depth]\ntokens = [100]")
    assert isinstance(camp.load, LoadSettings) and isinstance(camp.depth, DepthSettings)
    assert camp.load.streams == (4, 1) and camp.load.requests_per_stream == 2 and camp.load.prompt_class == "short"
    assert camp.load.max_tokens == 8 and camp.depth.max_tokens == 8 and camp.depth.repetitions == 3
    assert camp.load.slo == Slo(ttft_p90_ms=500.0) and camp.load.slo.per_user_decode_tps is None
    assert camp.sections["load"] is camp.load and camp.sections["depth"] is camp.depth
    plain = _parse("")
    assert plain.load is None and plain.depth is None


def test_frozen_slo_reads_load_with_the_same_model():
    """slo.py reads a frozen campaign's [load] with LoadSettings: the same refusals, other tables not judged."""
    text = "[load]\nstreams = [1]\nprompt_class = \"gone\"\n[load.slo]\nper_user_decode_tps = 5\n"
    # a class the frozen campaign defined in [prompts] is not looked up here: the level is read
    assert frozen_slo(text + "[other]\nx = 1\n", "run 1 campaign") == Slo(per_user_decode_tps=5.0)
    assert frozen_slo("[campaign]\nname = \"x\"\n", "w") is None and frozen_slo(None, "w") is None
    for bad, key in (("[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = nan", "load.slo.ttft_p90_ms"),
                     ("[load]\nstreams = [1]\n[load.slo]\nbogus = 1", "load.slo.bogus"),
                     ("[load]\nstreams = [1]\n[load.slo]", "load.slo"),
                     ("load = 1", "load")):
        with pytest.raises(CampaignError) as err:
            frozen_slo(bad, "run 1 campaign")
        assert str(err.value).startswith(f"run 1 campaign: key '{key}': ") and "\n" not in str(err.value)


def test_a_hostile_load_table_exits_2_and_stores_nothing(tmp_path):
    camp = tmp_path / "c.toml"
    camp.write_text("[load]\nstreams = [1, 2]\nrequests_per_stream = true\n" + campaign_text(URL))
    db = tmp_path / "c.db"
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert result.exit_code == 2
    assert "c.toml: key 'load.requests_per_stream': " in result.output
    assert not db.exists()


@pytest.mark.parametrize("nested", [
    "[load]\nstreams = " + "[" * 5000 + "1" + "]" * 5000,
    "[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = " + "{a = " * 5000 + "1" + "}" * 5000,
])
def test_nesting_too_deep_for_the_toml_reader_is_one_line_in_both_readers(nested):
    for read, where in ((_parse, "c.toml"), (lambda t: frozen_slo(t, "run 1 campaign"), "run 1 campaign")):
        with pytest.raises(CampaignError) as err:
            read(nested)
        assert str(err.value) == f"{where}: key '-': not usable TOML: nested too deeply to be a configuration"


@pytest.mark.parametrize("table, n_models, key", [
    ("[load]\nstreams = [250]\nrequests_per_stream = 1000", 5, "load.requests_per_stream"),  # 250,000 a model
    ("[depth]\ntokens = " + str(list(range(32))) + "\nrepetitions = 1000", 40, "depth.repetitions"),  # 32,000 a model
])
def test_the_whole_runs_plan_is_bounded_across_models(table, n_models, key):
    """Each model takes every step: steps within the per-model bound still make a plan that cannot end."""
    models = tuple(f"m{i}" for i in range(n_models))
    with pytest.raises(CampaignError) as err:
        parse_campaign(table + "\n" + campaign_text(URL, models=models), "c.toml")
    assert str(err.value).startswith(f"c.toml: key '{key}': the plan comes to ")
    half = parse_campaign(table + "\n" + campaign_text(URL, models=models[:n_models // 2]), "c.toml")
    assert len(half.models) == n_models // 2
