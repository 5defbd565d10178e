"""Starting the fit test's own llama-server: the flags it is given, and what a failed start says.

Split from ``fit.py`` along the process boundary: everything here is about
the server process and its binary, nothing about the store.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cardproof.daemon.server import llamacpp
from cardproof.daemon.store.crashes import CrashSignal, from_returncode

OWN_ARGS = ("-ngl", "999", "--fit", "off", "-lv", "4", "--log-colors", "off", "--no-webui")
_HELP_CACHE: dict[str, str] = {}


def own_args() -> list[str]:
    """:data:`OWN_ARGS` less the flags this llama-server does not know (``--fit`` came in 2026 builds).

    An older binary would refuse an unknown flag and every context would read
    as a failed load; a flag it lacks is a behaviour it lacks, so leaving it
    out changes nothing. Without a binary the list is returned whole (the
    start then fails with the binary's own reason).
    """
    try:
        binary = llamacpp.find_binary()
        key = str(binary)
        if key not in _HELP_CACHE:
            out = subprocess.run([key, "--help"], env=llamacpp.server_env(binary), capture_output=True,
                                 text=True, timeout=30)
            _HELP_CACHE[key] = out.stdout + out.stderr
    except (llamacpp.LlamaServerMissing, OSError, subprocess.SubprocessError):
        return list(OWN_ARGS)
    known = _HELP_CACHE[key]
    args, i = [], 0
    while i < len(OWN_ARGS):
        flag = OWN_ARGS[i]
        takes = i + 1 < len(OWN_ARGS) and not OWN_ARGS[i + 1].startswith("-")
        if re.search(rf"(^|[\s,]){re.escape(flag)}([\s,=]|$)", known, re.MULTILINE):
            args += OWN_ARGS[i:i + 1 + takes]
        i += 1 + takes
    return args




class LaunchFailed(Exception):
    """The server exited or never became ready; the text says how, ``signal`` which one killed it."""

    def __init__(self, text: str, signal: CrashSignal | None = None):
        super().__init__(text)
        self.signal = signal


@dataclass
class Launched:
    """A started server: where it answers, its process, how to stop it."""

    url: str
    pid: int | None
    stop: Callable[[], None]


def start_server(args: list[str], log_path: Path, timeout_s: float, *, binary: Path | None = None) -> Launched:
    """A real llama-server with ``args`` (``binary``: another build's); :class:`LaunchFailed` when it does not come up."""
    server = llamacpp.LlamaServerProcess(args, log_path=log_path, binary=binary)  # LlamaServerMissing: none here
    try:
        server.start(ready_timeout_s=timeout_s)
    except llamacpp.LlamaServerFailed as exc:
        server.stop()
        code = server.proc.returncode if server.proc is not None else None
        if "not healthy" in str(exc) or code is None:
            raise LaunchFailed(f"not ready after {timeout_s:g} s") from exc
        sig = from_returncode(code)
        if sig is not None:
            raise LaunchFailed(f"killed by {sig.describe()}", sig) from exc
        raise LaunchFailed(f"exited with status {code}" if code >= 0 else f"killed by signal {-code}") from exc
    except BaseException:
        server.stop()  # interrupted while loading: no server is left running behind the run
        raise
    return Launched(server.url, server.proc.pid if server.proc else None, server.stop)


def trained_context(path: str | None) -> int | None:
    """``<arch>.context_length`` from the GGUF header; None when the file or the key cannot be read."""
    if not path:
        return None
    try:
        from gguf import GGUFReader

        reader = GGUFReader(path)
        arch = reader.get_field("general.architecture")
        name = bytes(arch.parts[arch.data[0]]).decode("utf-8", "replace")
        field = reader.get_field(f"{name}.context_length")
        value = int(field.parts[field.data[0]][0])
    except Exception:  # a damaged or foreign file: the server's log may still say it
        return None
    return value if value > 0 else None
