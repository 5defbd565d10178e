"""The daemon's TOML configuration: one file, every error names file and key."""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import validate

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


@dataclass(frozen=True)
class CollectorsConfig:
    log_files: tuple[str, ...] = ()
    journal_units: tuple[str, ...] = ()
    sampler_interval_s: float = 1.0
    nvml: bool = True


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = False
    bind: str = "127.0.0.1"
    port: int = 9464


@dataclass(frozen=True)
class RetentionConfig:
    interval_h: float = 1.0
    memory_downsample_after_h: float = 24.0
    memory_bucket_s: int = 60
    log_lines_keep_days: float = 30.0
    keep_run_rows: bool = True


@dataclass(frozen=True)
class QuietConfig:
    enabled: bool = False
    quiet_s: float = 300.0
    give_up_s: float = 7200.0
    poll_s: float = 5.0
    max_foreign_tokens: int = 0
    max_foreign_requests: int = 0
    own_clients: tuple[str, ...] = ("127.0.0.1", "::1")
    blocked_clients: tuple[str, ...] = ()


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


_SECTIONS = {
    "daemon": {"db", "data_dir", "tick_s", "heartbeat_s", "queue_poll_s", "stop_timeout_s", "max_attempts"},
    "collectors": {"log_files", "journal_units", "sampler_interval_s", "nvml"},
    "metrics": {"enabled", "bind", "port"},
    "retention": {"interval_h", "memory_downsample_after_h", "memory_bucket_s", "log_lines_keep_days",
                  "keep_run_rows"},
    "quiet": {"enabled", "quiet_s", "give_up_s", "poll_s", "max_foreign_tokens", "max_foreign_requests",
              "own_clients", "blocked_clients"},
}


# (lowest, highest) per numeric key; a lowest of 0 means "above 0" for floats
_DAY_S = 86_400.0
_LIMITS = {
    "daemon.tick_s": (0.01, 60.0),
    "daemon.heartbeat_s": (0.01, 3_600.0),
    "daemon.queue_poll_s": (0.01, 3_600.0),
    "daemon.stop_timeout_s": (0, _DAY_S),
    "daemon.max_attempts": (1, 100),
    "collectors.sampler_interval_s": (0.01, 3_600.0),
    "metrics.port": (0, 65_535),
    "retention.interval_h": (0, 24 * 366),
    "retention.memory_downsample_after_h": (0, 24 * 366 * 100),
    "retention.memory_bucket_s": (1, 86_400),
    "retention.log_lines_keep_days": (0, 366 * 100),
    "quiet.quiet_s": (0, 30 * _DAY_S),
    "quiet.give_up_s": (0, 30 * _DAY_S),
    "quiet.poll_s": (0.01, 3_600.0),
    "quiet.max_foreign_tokens": (0, 10**12),
    "quiet.max_foreign_requests": (0, 10**12),
}
_MAX_ITEMS = 1_000


class _Reader:
    """Typed access to one section; each failure names the file and the key.

    Every number has a range (see ``_LIMITS``): finite, and bounded by what
    the daemon can act on (a tick of a microsecond would spin a core, a
    retention of 10**30 hours overflows the date arithmetic).
    """

    def __init__(self, path: str, section: str, data: Any):
        self.path, self.section = path, section
        if not isinstance(data, dict):
            self.fail("", f"expected a table, got {type(data).__name__}")
        for key in data:
            if key not in _SECTIONS[section]:
                self.fail(key, f"unknown key (expected one of: {', '.join(sorted(_SECTIONS[section]))})")
        self.data = data

    def fail(self, key: str, message: str):
        key = f"{self.section}.{key}" if key else self.section
        raise ConfigError(self.path, key, message)

    def _check(self, key: str, default: Any, check) -> Any:
        if key not in self.data:
            return default
        try:
            return check(self.data[key])
        except validate.Invalid as exc:
            self.fail(key, str(exc))

    def number(self, key: str, default: float) -> float:
        lo, hi = _LIMITS[f"{self.section}.{key}"]
        return self._check(key, default, lambda v: validate.number(v, lo, hi, above=lo == 0))

    def integer(self, key: str, default: int) -> int:
        lo, hi = _LIMITS[f"{self.section}.{key}"]
        return self._check(key, default, lambda v: validate.integer(v, lo, hi))

    def boolean(self, key: str, default: bool) -> bool:
        return self._check(key, default, validate.boolean)

    def file_path(self, key: str) -> str | None:
        return self._check(key, None, validate.path)

    def string(self, key: str, default: str) -> str:
        return self._check(key, default, lambda v: validate.text(v, max_chars=256))

    def items(self, key: str, default: tuple[str, ...], check) -> tuple[str, ...]:
        """A list of at most ``_MAX_ITEMS`` strings, each passing ``check``; the key names the item."""
        v = self.data.get(key, list(default))
        if not isinstance(v, list) or len(v) > _MAX_ITEMS:
            self.fail(key, f"expected a list of at most {_MAX_ITEMS} strings, got {validate.describe(v)}")
        for i, item in enumerate(v):
            try:
                check(item)
            except validate.Invalid as exc:
                self.fail(f"{key}[{i}]", str(exc))
        return tuple(v)

    def addresses(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        def address(a):
            validate.text(a, what="an IP address", max_chars=64)
            try:
                ipaddress.ip_address(a)
            except ValueError:
                raise validate.Invalid(f"expected an IP address, got {validate.quoted(a)}") from None

        return self.items(key, default, address)


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
    for section in data:
        if section not in _SECTIONS:
            raise ConfigError(path, section, f"unknown section (expected one of: {', '.join(sorted(_SECTIONS))})")
    d = _Reader(path, "daemon", data.get("daemon", {}))
    c = _Reader(path, "collectors", data.get("collectors", {}))
    m = _Reader(path, "metrics", data.get("metrics", {}))
    r = _Reader(path, "retention", data.get("retention", {}))
    q = _Reader(path, "quiet", data.get("quiet", {}))

    data_dir = Path(d.file_path("data_dir") or default_data_dir)
    db = d.file_path("db")
    tick_s = d.number("tick_s", 1.0)
    heartbeat_s = d.number("heartbeat_s", 5.0)
    if heartbeat_s < tick_s:
        d.fail("heartbeat_s", f"must be at least tick_s ({tick_s:g}), got {heartbeat_s:g}")
    bind = m.string("bind", "127.0.0.1")
    try:
        loopback = ipaddress.ip_address(bind).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        # the endpoint has no authentication: it is for a local scraper only
        m.fail("bind", f"expected a loopback address such as 127.0.0.1, got {bind!r}")
    quiet_s = q.number("quiet_s", 300.0)
    give_up_s = q.number("give_up_s", 7200.0)
    if give_up_s < quiet_s:
        q.fail("give_up_s", f"must be at least quiet_s ({quiet_s:g}), got {give_up_s:g}")
    return DaemonConfig(
        path=path,
        db=Path(db) if db else (Path(default_db) if "data_dir" not in d.data else data_dir / "cardproof.db"),
        data_dir=data_dir,
        tick_s=tick_s,
        heartbeat_s=heartbeat_s,
        queue_poll_s=d.number("queue_poll_s", 5.0),
        stop_timeout_s=d.number("stop_timeout_s", 120.0),
        max_attempts=d.integer("max_attempts", 3),
        collectors=CollectorsConfig(
            log_files=c.items("log_files", (), validate.path),
            journal_units=c.items("journal_units", (), validate.unit_name),
            sampler_interval_s=c.number("sampler_interval_s", 1.0),
            nvml=c.boolean("nvml", True),
        ),
        metrics=MetricsConfig(enabled=m.boolean("enabled", False), bind=bind,
                              port=m.integer("port", 9464)),
        retention=RetentionConfig(
            interval_h=r.number("interval_h", 1.0),
            memory_downsample_after_h=r.number("memory_downsample_after_h", 24.0),
            memory_bucket_s=r.integer("memory_bucket_s", 60),
            log_lines_keep_days=r.number("log_lines_keep_days", 30.0),
            keep_run_rows=r.boolean("keep_run_rows", True),
        ),
        quiet=QuietConfig(
            enabled=q.boolean("enabled", False),
            quiet_s=quiet_s,
            give_up_s=give_up_s,
            poll_s=q.number("poll_s", 5.0),
            max_foreign_tokens=q.integer("max_foreign_tokens", 0),
            max_foreign_requests=q.integer("max_foreign_requests", 0),
            own_clients=q.addresses("own_clients", ("127.0.0.1", "::1")),
            blocked_clients=q.addresses("blocked_clients", ()),
        ),
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
