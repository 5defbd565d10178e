"""The systemd unit, rendered from the template shipped beside this module."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from .config import DaemonConfig

WATCHDOG_S = 60


def exec_start(config_path: Path) -> str:
    """The command systemd runs: this installation's ``cardproof``, absolute."""
    script = Path(sys.executable).parent / "cardproof"
    if script.exists():
        argv = [str(script)]
    else:  # installed without the console script: the module works as well
        argv = [sys.executable, "-m", "cardproof.cli"]
    return shlex.join([*argv, "daemon", "run", "--config", str(config_path)])


def render_unit(config: DaemonConfig, config_path: Path, *, user: str | None = None,
                watchdog_s: int = WATCHDOG_S) -> str:
    """Unit text for ``config``: the data dir and the database's folder writable, the rest not."""
    template = resources.files(__package__).joinpath("cardproof.service").read_text()
    writable = sorted({str(config.data_dir), str(Path(config.db).parent)})
    state_dirs = sorted({p.removeprefix("/var/lib/").split("/")[0] for p in writable if p.startswith("/var/lib/")})
    values = {
        "exec_start": exec_start(config_path),
        "user_line": f"User={user}" if user else "",
        # pings follow heartbeats: the watchdog must allow a few heartbeat periods
        "watchdog_s": str(max(watchdog_s, int(4 * config.heartbeat_s))),
        # systemd waits longer than the daemon does, so the daemon records the interruption itself
        "timeout_stop_s": str(int(config.stop_timeout_s) + 30),
        "state_directory_line": f"StateDirectory={' '.join(state_dirs)}" if state_dirs else "",
        "read_write_paths": " ".join(writable),
    }
    text = template
    for key, value in values.items():
        text = text.replace("{" + key + "}\n", "") if value == "" else text.replace("{" + key + "}", value)
    return text


def verify_unit(path: Path) -> tuple[bool | None, str]:
    """``systemd-analyze verify``: (True, output), (False, output), or (None, why it could not run)."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return None, "systemd-analyze not found (Debian: apt-get install systemd)"
    proc = subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=60)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()
