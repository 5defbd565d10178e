"""Issue 18 item 7: one validation layer (pydantic models declared with the checks of daemon/validate.py).

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
