"""The daemon's TOML configuration: one file, every error names file and key.

Declared as pydantic models with the value checks of ``daemon/campaign/validate.py``,
the same layer as the campaign reader (``daemon/campaign/tables/__init__.py``).
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationError, model_validator

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.schema import Section, first_problem

DEFAULT_CONFIG_PATH = Path("/etc/cardproof/daemon.toml")

EXAMPLE_CONFIG = """\
# cardproof daemon configuration (cardproof daemon run --config FILE)

[daemon]
db = "/var/lib/cardproof/cardproof.db"
data_dir = "/var/lib/cardproof"   # writable by the service (ReadWritePaths)
tick_s = 1.0                      # main loop period: watchdog pings, collector ticks
heartbeat_s = 5.0                 # heartbeat row written at least this often
queue_poll_s = 5.0                # how often the queue is looked at when idle
stop_timeout_s = 120              # SIGTERM: longest wait for the current request
max_attempts = 3                  # a campaign interrupted this often is given up

[collectors]
log_files = []                    # e.g. ["/var/log/llama-server.log"]
journal_units = []                # e.g. ["llama-server.service"]
sampler_interval_s = 1.0          # NVML memory sampler
nvml = true

[metrics]
enabled = false                   # Prometheus text endpoint
bind = "127.0.0.1"                # loopback only
port = 9464

[retention]
interval_h = 1.0                  # how often retention runs (when idle)
memory_downsample_after_h = 24.0  # older idle-time memory samples are thinned
memory_bucket_s = 60              # to the peak reading per bucket
log_lines_keep_days = 30.0        # unreferenced lines; lines behind facts stay forever
keep_run_rows = true              # never thin memory samples / lines taken during a run

[quiet]
enabled = false                   # wait for quiet cards before each campaign
quiet_s = 300                     # foreign activity must stay below the limits this long
give_up_s = 7200                  # then give up, with the reason
poll_s = 5.0
max_foreign_tokens = 0            # per quiet window
max_foreign_requests = 0
own_clients = ["127.0.0.1", "::1"]
blocked_clients = []              # addresses that should not reach the server at all
"""


class ConfigError(Exception):
    """A config file that cannot be used; str() is the one-line message."""

    def __init__(self, path: str, key: str, message: str):
        self.path = path
        self.key = key
        super().__init__(f"{validate.shown(path, validate.PATH_CHARS)}: key '{validate.shown(key)}': {message}")


# Every number has a range: finite, and bounded by what the daemon can act on (a tick of a
# microsecond would spin a core, a retention of 10**30 hours overflows the date arithmetic).
# A lowest of 0 means "above 0" for the float keys.
_DAY_S = 86_400.0
_MAX_ITEMS = 1_000


def _seconds(lo: float, hi: float):
    return validate.Number(lo, hi, above=lo == 0)


def _strings(value: Any) -> list:
    if not isinstance(value, list) or len(value) > _MAX_ITEMS:
        raise validate.Invalid(f"expected a list of at most {_MAX_ITEMS} strings, got {validate.describe(value)}")
    return value


def _address(value: Any) -> str:
    validate.text(value, what="an IP address", max_chars=64)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise validate.Invalid(f"expected an IP address, got {validate.quoted(value)}") from None
    return value


def _loopback(value: Any) -> str:
    """The metrics endpoint has no authentication: it is for a local scraper only."""
    bind = validate.text(value, max_chars=256)
    try:
        loopback = ipaddress.ip_address(bind).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise validate.Invalid(f"expected a loopback address such as 127.0.0.1, got {bind!r}")
    return bind


def _not_below(section: Section, key: str, floor_key: str) -> Section:
    """``section`` if its ``key`` is at least its ``floor_key``; the refusal names ``key``."""
    value, floor = getattr(section, key), getattr(section, floor_key)
    if value < floor:
        raise validate.Invalid(f"must be at least {floor_key} ({floor:g}), got {value:g}", at=(key,))
    return section


_Addresses = Annotated[tuple[validate.checked(_address, str), ...], BeforeValidator(_strings)]


class _DaemonSection(Section):
    db: validate.FilePath | None = None
    data_dir: validate.FilePath | None = None
    tick_s: _seconds(0.01, 60.0) = 1.0
    heartbeat_s: _seconds(0.01, 3_600.0) = 5.0
    queue_poll_s: _seconds(0.01, 3_600.0) = 5.0
    stop_timeout_s: _seconds(0, _DAY_S) = 120.0
    max_attempts: validate.Int(1, 100) = 3

    @model_validator(mode="after")
    def _heartbeat_after_tick(self):
        return _not_below(self, "heartbeat_s", "tick_s")


class CollectorsConfig(Section):
    log_files: Annotated[tuple[validate.FilePath, ...], BeforeValidator(_strings)] = ()
    journal_units: Annotated[tuple[validate.UnitName, ...], BeforeValidator(_strings)] = ()
    sampler_interval_s: _seconds(0.01, 3_600.0) = 1.0
    nvml: validate.Bool = True


class MetricsConfig(Section):
    enabled: validate.Bool = False
    bind: validate.checked(_loopback, str) = "127.0.0.1"
    port: validate.Int(0, 65_535) = 9464


class RetentionConfig(Section):
    interval_h: _seconds(0, 24 * 366) = 1.0
    memory_downsample_after_h: _seconds(0, 24 * 366 * 100) = 24.0
    memory_bucket_s: validate.Int(1, 86_400) = 60
    log_lines_keep_days: _seconds(0, 366 * 100) = 30.0
    keep_run_rows: validate.Bool = True


class QuietConfig(Section):
    enabled: validate.Bool = False
    quiet_s: _seconds(0, 30 * _DAY_S) = 300.0
    give_up_s: _seconds(0, 30 * _DAY_S) = 7200.0
    poll_s: _seconds(0.01, 3_600.0) = 5.0
    max_foreign_tokens: validate.Int(0, 10**12) = 0
    max_foreign_requests: validate.Int(0, 10**12) = 0
    own_clients: _Addresses = ("127.0.0.1", "::1")
    blocked_clients: _Addresses = ()

    @model_validator(mode="after")
    def _give_up_after_quiet(self):
        return _not_below(self, "give_up_s", "quiet_s")


class _ConfigFile(Section):
    """The whole file: one table per section, each optional."""

    daemon: _DaemonSection = _DaemonSection()
    collectors: CollectorsConfig = CollectorsConfig()
    metrics: MetricsConfig = MetricsConfig()
    retention: RetentionConfig = RetentionConfig()
    quiet: QuietConfig = QuietConfig()


@dataclass(frozen=True)
class DaemonConfig:
    path: str | None
    db: Path
    data_dir: Path
    tick_s: float = 1.0
    heartbeat_s: float = 5.0
    queue_poll_s: float = 5.0
    stop_timeout_s: float = 120.0
    max_attempts: int = 3
    collectors: CollectorsConfig = field(default_factory=CollectorsConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    quiet: QuietConfig = field(default_factory=QuietConfig)


def default_config(db: Path, data_dir: Path) -> DaemonConfig:
    """The configuration used when no file exists (foreground use without systemd)."""
    return DaemonConfig(path=None, db=Path(db), data_dir=Path(data_dir))


def parse_config(text: str, path: str, *, default_db: Path, default_data_dir: Path) -> DaemonConfig:
    """Validate config TOML; ``default_db``/``default_data_dir`` fill what the file leaves out."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, "-", f"not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(path, "-", f"not usable TOML: {validate.NESTED_TOO_DEEP}") from None
    try:
        cfg = _ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, *first_problem(exc, _ConfigFile, section_word="section")) from None
    d = cfg.daemon
    data_dir = Path(d.data_dir or default_data_dir)
    # data_dir alone puts the database inside it
    db = Path(d.db) if d.db else (data_dir / "cardproof.db" if d.data_dir else Path(default_db))
    return DaemonConfig(
        path=path, db=db, data_dir=data_dir, tick_s=d.tick_s, heartbeat_s=d.heartbeat_s,
        queue_poll_s=d.queue_poll_s, stop_timeout_s=d.stop_timeout_s, max_attempts=d.max_attempts,
        collectors=cfg.collectors, metrics=cfg.metrics, retention=cfg.retention, quiet=cfg.quiet,
    )


def load_config(path: str | Path, *, default_db: Path, default_data_dir: Path) -> DaemonConfig:
    """Read and validate the config file at ``path``; raise ConfigError naming the key."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(str(p), "-", "no such file (cardproof daemon example-config prints one)") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ConfigError(str(p), "-", f"cannot read file: {exc}") from exc
    return parse_config(text, str(p), default_db=default_db, default_data_dir=default_data_dir)
