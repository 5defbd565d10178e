"""Every campaign and daemon-config key has a type and a range.

Bad values go through the real CLI (click's runner, the real SQLite store):
exit 2, exactly one line on stderr naming the file and the dotted key, and
the database holds exactly what it held before. A fuzz of values (hypothesis)
checks that a value either parses inside its range or is refused naming its
key, never anything else.
"""

from __future__ import annotations

import math
import sqlite3
import unicodedata

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cardproof.cli import cli
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.campaign.check import MAX_TOKENS
from cardproof.daemon.server.prompts import build_prompt
from cardproof.daemon.service.config import ConfigError, parse_config
from cardproof.daemon.store import open_store

GOOD = """\
[campaign]
name = "ok"
prompt_classes = ["short"]
repetitions = 2
max_tokens = 16

[server]
url = "http://127.0.0.1:9"

[[models]]
name = "a"

[[models]]
name = "b"
"""

HUGE = "9223372036854775807"

# (text in GOOD, its replacement, the key named in the error[, TOML appended at the end])
BAD = [
    # the hostile values a reviewer tried, as given
    ("repetitions = 2", f"repetitions = {HUGE}", "campaign.repetitions"),
    ("[[models]]\nname = \"a\"", f"[prompts.big]\ntarget_tokens = {HUGE}\n[[models]]\nname = \"a\"",
     "prompts.big.target_tokens"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nrequest_timeout_s = nan', "server.request_timeout_s"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nrequest_timeout_s = inf', "server.request_timeout_s"),
    ('url = "http://127.0.0.1:9"', 'url = "http://[::1"', "server.url"),
    ('name = "b"', 'name = "b"\n[gates.load_time]\nthreshold = nan', "gates.load_time.threshold"),
    # NUL and control characters in names
    ('name = "a"', 'name = "a\\u0000b"', "models[0].name"),
    ('name = "b"', 'name = "b\\u001b[31m"', "models[1].name"),
    ('name = "b"', 'name = "b\\u0085"', "models[1].name"),  # C1 control
    ('name = "b"', 'name = "b\\u202e"', "models[1].name"),  # right-to-left override: looks like another name
    ('name = "b"', 'name = "b\\nc"', "models[1].name"),
    ('name = "b"', 'name = " b"', "models[1].name"),
    ('name = "b"', 'name = "' + "b" * 257 + '"', "models[1].name"),
    ('name = "ok"', 'name = "o\\tk"', "campaign.name"),
    ("[[models]]\nname = \"a\"", "[prompts.\"cl\\u0000ass\"]\ntarget_tokens = 10\n[[models]]\nname = \"a\"",
     "prompts.cl\\x00ass"),
    ("[[models]]\nname = \"a\"", "[prompts.\"long.ctx\"]\ntarget_tokens = 10\n[[models]]\nname = \"a\"",
     "prompts.long.ctx"),
    ('prompt_classes = ["short"]', 'prompt_classes = ["short", "short"]', "campaign.prompt_classes[1]"),
    ('prompt_classes = ["short"]', 'prompt_classes = ["short", 3]', "campaign.prompt_classes[1]"),
    ('name = "b"', 'name = "a"', "models[1].name"),  # duplicate model
    # the other numbers: ints in range, bool is not an int, floats finite
    ("repetitions = 2", "repetitions = 10001", "campaign.repetitions"),
    ("repetitions = 2", "repetitions = true", "campaign.repetitions"),
    ("repetitions = 2", "repetitions = 2.0", "campaign.repetitions"),
    ("repetitions = 2", "repetitions_reasoning = 0", "campaign.repetitions_reasoning"),
    ("max_tokens = 16", f"max_tokens = {MAX_TOKENS + 1}", "campaign.max_tokens"),
    ("max_tokens = 16", "max_tokens = -1", "campaign.max_tokens"),
    ("[[models]]\nname = \"a\"", "[prompts.big]\ntarget_tokens = 0\n[[models]]\nname = \"a\"",
     "prompts.big.target_tokens"),
    ("[[models]]\nname = \"a\"", "[prompts.big]\n[[models]]\nname = \"a\"", "prompts.big.target_tokens"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nrequest_timeout_s = 0', "server.request_timeout_s"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nrequest_timeout_s = 1e400',
     "server.request_timeout_s"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nrequest_timeout_s = 1' + "0" * 400,
     "server.request_timeout_s"),  # an int too large for a float must be refused, not overflow
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nrequest_timeout_s = 86401',
     "server.request_timeout_s"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nbackend = "ollama"\nnum_ctx = ' + HUGE,
     "server.num_ctx"),
    ('name = "b"', 'name = "b"\n[gates.load_time]\nthreshold = inf', "gates.load_time.threshold"),
    ('name = "b"', 'name = "b"\n[gates.foreign_load]\nthreshold = -1', "gates.foreign_load.threshold"),
    ('name = "b"', 'name = "b"\n[gates.foreign_load]\nthreshold = true', "gates.foreign_load.threshold"),
    ('name = "b"', 'name = "b"\n[probes]\nrepeat = ' + HUGE, "probes.repeat"),
    ('name = "b"', 'name = "b"\n[probes]\nmax_tokens = ' + HUGE, "probes.max_tokens"),
    ('name = "b"', 'name = "b"\n[probes]\ncode_timeout_s = nan', "probes.code_timeout_s"),
    ('name = "b"', 'name = "b"\n[probes]\nrun = ["coding", "coding"]', "probes.run[1]"),
    # URLs parsed, not prefix-matched
    ('url = "http://127.0.0.1:9"', 'url = "http://"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:99999"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:0"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:x"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "ftp://127.0.0.1:9"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9/v1?key=1"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1 :9"', "server.url"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9/\\u0000"', "server.url"),
    ('name = "b"', 'name = "b"\n[embedding]\nurl = "http://[::1"', "embedding.url"),
    # strings that reach argv, the environment or open()
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\nlog_file = "/tmp/a\\u0000b"', "server.log_file"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\njournal_unit = "x y.service"',
     "server.journal_unit"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\njournal_unit = "--all"', "server.journal_unit"),
    ('url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\napi_key_env = "A=B"', "server.api_key_env"),
    ('name = "a"', 'name = "a"\nfile = "/m/\\u0007.gguf"', "models[0].file"),
    # rules: control characters other than tab/newline, and numbers that are not finite
    ('name = "b"', 'name = "b"\n[rules]\nr = "decode.short >= 1\\u0000"', "rules.r"),
    ('name = "b"', 'name = "b"\n[rules]\nr = "decode.short >= 1' + "0" * 400 + '"', "rules.r"),
    ('name = "b"', 'name = "b"\n[rules]\n"r\\u0000" = "decode.short >= 1"', "rules.r\\x00"),
    # the whole plan (60 models x 2 x 10,000 samples) and the file itself
    ("repetitions = 2", "repetitions = 10000\nreasoning = [false, true]\nrepetitions_reasoning = 10000",
     "campaign.repetitions", "".join(f'[[models]]\nname = "m{i}"\n' for i in range(58))),
    ('name = "ok"', 'name = "ok"\nx = ' + "[" * 5000 + "]" * 5000, "-"),
]


def _snapshot(db) -> dict:
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
    out = {t: conn.execute(f'select * from "{t}"').fetchall() for t in tables}
    conn.close()
    return out


@pytest.fixture(scope="module")
def seeded_db(tmp_path_factory):
    """A store that already holds a campaign row: a refused file must leave it exactly as it is."""
    db = tmp_path_factory.mktemp("limits") / "store.db"
    store = open_store(db)
    store.insert("campaigns", {"name": "kept", "sha256": "x", "toml_text": "", "registered_at": "t"})
    store.close()
    return db


def test_good_campaign_is_accepted():
    c = parse_campaign(GOOD, "good.toml")
    assert [m.name for m in c.models] == ["a", "b"] and c.url == "http://127.0.0.1:9"


@pytest.mark.parametrize("case", BAD, ids=[f"{i}-{b[2]}" for i, b in enumerate(BAD)])
def test_bad_value_exits_2_with_one_line_naming_the_key_and_writes_nothing(tmp_path, seeded_db, case):
    old, new, key, *appended = case
    text = GOOD.replace(old, new, 1) + "".join(appended)
    assert text != GOOD
    camp = tmp_path / "bad.toml"
    camp.write_text(text, encoding="utf-8")
    before = _snapshot(seeded_db)
    for args in (["run", str(camp), "--db", str(seeded_db)], ["queue", "add", str(camp), "--db", str(seeded_db)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"error: {camp}: key '{key}': "), lines[0]
        assert result.stdout == ""
    assert _snapshot(seeded_db) == before
    fresh = tmp_path / "fresh.db"
    assert CliRunner().invoke(cli, ["run", str(camp), "--db", str(fresh)]).exit_code == 2
    assert not fresh.exists()


def test_a_file_name_with_a_newline_still_gives_one_line(tmp_path):
    camp = tmp_path / "two\nlines.toml"
    camp.write_text(GOOD.replace("repetitions = 2", "repetitions = 0"))
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(tmp_path / "d.db")])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "two\\nlines.toml: key 'campaign.repetitions'" in result.stderr


def test_file_name_that_cannot_be_a_campaign_name(tmp_path):
    camp = tmp_path / "bell\a.toml"
    camp.write_text(GOOD.replace('name = "ok"\n', ""))
    with pytest.raises(CampaignError) as err:
        parse_campaign(camp.read_text(), str(camp))
    assert err.value.key == "campaign.name" and "file name" in str(err.value)


def test_oversized_file_is_refused_before_parsing(tmp_path):
    camp = tmp_path / "big.toml"
    camp.write_text(GOOD + "# " + "x" * (1 << 20) + "\n")
    result = CliRunner().invoke(cli, ["run", str(camp), "--db", str(tmp_path / "d.db")])
    assert result.exit_code == 2 and "key '-': file is larger than 1,048,576 bytes" in result.stderr


def test_values_at_the_limits_are_accepted_and_usable_downstream():
    """The upper bounds are values a run can carry out: the prompt of the largest class is built in bounded memory."""
    text = GOOD
    for old, new in (
        ("repetitions = 2", "repetitions = 10000"),
        ("max_tokens = 16", f"max_tokens = {MAX_TOKENS}"),
        ('[[models]]\nname = "a"', f'[prompts.huge]\ntarget_tokens = {MAX_TOKENS}\n[[models]]\nname = "a"'),
        ('prompt_classes = ["short"]', 'prompt_classes = ["short", "huge"]'),
        ('url = "http://127.0.0.1:9"', 'url = "http://user:pw@[::1]:8080/v1/"\nrequest_timeout_s = 86400'),
    ):
        text = text.replace(old, new)
    c = parse_campaign(text, "edge.toml")
    assert (c.repetitions, c.max_tokens, c.prompt_tokens["huge"]) == (10000, MAX_TOKENS, MAX_TOKENS)
    assert c.url == "http://user:pw@[::1]:8080/v1" and c.request_timeout_s == 86400.0
    prompt = build_prompt(c.prompt_tokens["huge"], "abc")
    assert len(prompt.split()) < MAX_TOKENS and len(prompt) < 10_000_000
    allowed = parse_campaign(GOOD.replace('name = "ok"', 'name = "ok"\ncanaries = false')
                             + '[rules]\nr = """decode.short >= 1\n\tand pinned == false"""\n', "tab.toml")
    assert "\t" in allowed.rules["r"]  # tab and newline are allowed in a rule text (a multi-line TOML string)


# -- fuzz: a value parses inside its range or is refused naming its key ------------------------------
_values = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=20),
)
_NUMERIC = {
    "campaign.repetitions": (1, 10_000),
    "campaign.max_tokens": (1, MAX_TOKENS),
    "server.request_timeout_s": (0, 86_400),
    "gates.load_time.threshold": (0, 1e9),
    "probes.code_timeout_s": (0, 3_600),
}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return '"' + "".join(c if c.isalnum() else f"\\U{ord(c):08x}" for c in value) + '"'
    return str(value)


_FUZZ = '[campaign]\n{campaign}\n[server]\nurl = "http://127.0.0.1:9"\n{server}\n[[models]]\nname = "a"\n{extra}\n'


def _fuzz_text(key: str, value) -> str:
    line = f"{key.rpartition('.')[2]} = {_toml(value)}"
    slots = {"campaign": "", "server": "", "extra": ""}
    head = key.split(".")[0]
    if head in ("campaign", "server"):
        slots[head] = line
    else:
        slots["extra"] = f"[{key.rpartition('.')[0]}]\n{line}"
    return _FUZZ.format(**slots)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(sorted(_NUMERIC)), value=_values)
def test_fuzzed_numbers_are_in_range_or_refused_by_key(key, value):
    try:
        c = parse_campaign(_fuzz_text(key, value), "fuzz.toml")
    except CampaignError as exc:
        assert exc.key == key and "\n" not in str(exc)
        return
    got = {
        "campaign.repetitions": c.repetitions, "campaign.max_tokens": c.max_tokens,
        "server.request_timeout_s": c.request_timeout_s, "gates.load_time.threshold": c.gates["load_time"].threshold,
        "probes.code_timeout_s": c.probes.code_timeout_s if c.probes else None,
    }[key]
    lo, hi = _NUMERIC[key]
    assert not isinstance(value, (bool, str)) and math.isfinite(got) and lo <= got <= hi


@settings(max_examples=150, deadline=None)
@given(name=st.text(min_size=1, max_size=40))
def test_fuzzed_model_names_are_printable_or_refused(name):
    text = GOOD.replace('name = "a"', f"name = {_toml(name)}", 1)
    try:
        c = parse_campaign(text, "fuzz.toml")
    except CampaignError as exc:
        assert exc.key in ("models[0].name", "models[1].name") and "\n" not in str(exc)
        return
    # no control, format (bidi, zero-width), separator, surrogate or private-use character; no outer whitespace
    assert c.models[0].name == name and name == name.strip()
    assert not {unicodedata.category(ch) for ch in name} & {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}


# -- the daemon config: the same treatment ----------------------------------------------------------
DEFAULTS = {"default_db": "/tmp/never.db", "default_data_dir": "/tmp"}


@pytest.mark.parametrize("text,key", [
    ("[daemon]\ntick_s = nan\n", "daemon.tick_s"),
    ("[daemon]\ntick_s = 0.000001\n", "daemon.tick_s"),
    ("[daemon]\nheartbeat_s = inf\n", "daemon.heartbeat_s"),
    (f"[daemon]\nmax_attempts = {HUGE}\n", "daemon.max_attempts"),
    ("[daemon]\nmax_attempts = true\n", "daemon.max_attempts"),
    ("[daemon]\nstop_timeout_s = 1" + "0" * 400 + "\n", "daemon.stop_timeout_s"),
    ('[daemon]\ndb = "/var/lib/a\\u0000.db"\n', "daemon.db"),
    ("[collectors]\nsampler_interval_s = nan\n", "collectors.sampler_interval_s"),
    ('[collectors]\njournal_units = ["ok.service", "bad unit"]\n', "collectors.journal_units[1]"),
    ('[collectors]\nlog_files = ["/a\\u0001"]\n', "collectors.log_files[0]"),
    ("[metrics]\nport = 70000\n", "metrics.port"),
    ("[retention]\ninterval_h = 1e300\n", "retention.interval_h"),
    ("[retention]\nlog_lines_keep_days = nan\n", "retention.log_lines_keep_days"),
    (f"[retention]\nmemory_bucket_s = {HUGE}\n", "retention.memory_bucket_s"),
    ("[quiet]\npoll_s = -inf\n", "quiet.poll_s"),
    (f"[quiet]\nmax_foreign_tokens = {HUGE}\n", "quiet.max_foreign_tokens"),
    ('[quiet]\nown_clients = ["127.0.0.1\\u0000"]\n', "quiet.own_clients[0]"),
    ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "-"),
])
def test_daemon_config_numbers_and_strings_have_ranges(tmp_path, text, key):
    with pytest.raises(ConfigError) as err:
        parse_config(text, "daemon.toml", **DEFAULTS)
    assert err.value.key == key and "\n" not in str(err.value)
    cfg = tmp_path / "daemon.toml"
    cfg.write_text(text)
    result = CliRunner().invoke(cli, ["daemon", "run", "--config", str(cfg)])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert f"key '{key}'" in result.stderr
