"""Where a variant is loaded: a server of cardproof's own, started with the base's arguments and the variant's.

The campaign's server is the user's: cardproof does not rewrite its preset or
restart it. A variant is loaded instead by a server cardproof starts for the
run, with the base model's own arguments as that server reports them and the
variant's in place of the ones it changes, so the variant differs from its
base in the variant's arguments only:

* **router mode** -- the router lists each model's arguments (``GET /models``:
  ``status.preset``, the section it built, and ``status.args``, the child's
  command line). cardproof writes a preset for the run, one section per
  variant (``base~name``: the base's section, less the keys the variant sets,
  plus the variant's), and starts a router of its own on it with the same
  binary. Each variant is then loaded, timed, logged and measured the way the
  router path loads any model; one at a time (``--models-max 1``).
* **single server** -- as the fit test does, a llama-server per variant,
  started with the base server's command line (read from ``/proc`` when the
  server runs on this machine; else only the model file, and the article
  says so) with the variant's arguments merged in; its log is its own file.

Both add only the log settings the evidence needs (``-lv 4``, no colours;
``-lv 5`` where the variant overrides tensors, whose one proof is a debug line).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import psutil

from cardproof.daemon.server import llamacpp
from cardproof.daemon.memory.procinfo import listening_pids
from cardproof.daemon.campaign.variant_args import (LOG_FLAGS, OWN_FLAGS, help_groups, merged, pairs, preset_keys,
                                                    preset_lines)

_HELP: dict[str, str] = {}
# preset keys cardproof sets in every variant section, or that name another process's address or log
_OWN_KEYS = frozenset({"host", "port", "alias", "a", "log-verbosity", "verbosity", "lv", "log-colors",
                       "log-file", "log-disable", "log-prefix", "log-timestamps", "v", "verbose", "q", "quiet",
                       "models-preset", "models-dir", "models-max", "models-autoload"})


@dataclass
class BaseArgs:
    """The base model's server arguments as read, and where from."""

    source: str  # "router /models" | "/proc command line" | "not read"
    args: list[str] = field(default_factory=list)  # without binary, address, alias and log settings
    preset: list[tuple[str, str]] = field(default_factory=list)  # the router's own section, as key = value
    binary: Path | None = None


def log_args(variant: list[str] | tuple[str, ...]) -> list[str]:
    """The log settings the evidence needs; a debug level where a tensor override must show."""
    overrides = any(f in ("-ot", "--override-tensor", "-ncmoe", "--n-cpu-moe") for f, _ in pairs(variant))
    return ["--log-verbosity", "5" if overrides else "4", "--log-colors", "off"]


def _strip(args: list[str]) -> list[str]:
    """A command line less what each server of its own sets anew: address, name, log."""
    return [t for f, v in pairs(args) if f not in OWN_FLAGS - {"-m", "--model"} and f not in LOG_FLAGS
            for t in (f, v) if t]


def _binary(path: str | None) -> Path | None:
    """The base's binary where this machine has it (the variant runs the same build), else None."""
    p = Path(path) if path else None
    return p if p is not None and p.is_file() else None


def router_base(entry: dict | None) -> BaseArgs | None:
    """The base's arguments from the router's ``/models`` entry; None where it lists none."""
    status = (entry or {}).get("status")
    if not isinstance(status, dict):
        return None
    args = status.get("args")
    args = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
    preset = []
    text = status.get("preset")
    if isinstance(text, str):
        for line in text.splitlines():
            key, eq, value = line.partition("=")
            if eq and not line.lstrip().startswith(("[", ";", "#")):
                preset.append((key.strip(), value.strip()))
    if not args and not preset:
        return None
    return BaseArgs("router /models", _strip(args[1:]) if args else [], preset, _binary(args[0] if args else None))


def single_base(url: str) -> BaseArgs | None:
    """The command line of the server answering at ``url``, where it runs on this machine and may be read."""
    parsed = urlparse(url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1") or not parsed.port:
        return None
    for pid in listening_pids(parsed.port):
        try:
            cmd = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        if cmd and "llama-server" in Path(cmd[0]).name:
            return BaseArgs("/proc command line", _strip(cmd[1:]), [], _binary(cmd[0]))
    return None


def groups_for(binary: Path | None) -> dict[str, frozenset[str]]:
    """Every option's spellings from the binary's ``--help`` (cached), for merging a variant over its base."""
    try:
        path = binary or llamacpp.find_binary()
    except llamacpp.LlamaServerMissing:
        return {}
    key = str(path)
    if key not in _HELP:
        try:
            out = subprocess.run([key, "--help"], env=llamacpp.server_env(path), capture_output=True, text=True,
                                 timeout=30)
            _HELP[key] = out.stdout + out.stderr
        except (OSError, subprocess.SubprocessError):
            _HELP[key] = ""
    return help_groups(_HELP[key])


def preset_section(name: str, base: BaseArgs, variant: tuple[str, ...], model_file: str | None,
                   groups: dict[str, frozenset[str]]) -> list[str]:
    """One preset section: the base's, less what the variant sets and cardproof's own keys, plus the variant's."""
    changed: set[str] = set()
    for flag, _ in pairs(variant):
        changed |= preset_keys(flag, groups)
    if base.preset:
        kept = [(k, v) for k, v in base.preset if k not in changed and k not in _OWN_KEYS]
    else:  # no section text: the child's command line, each flag as its key
        kept = [(k, v) for k, v in preset_lines(base.args) if k not in changed and k not in _OWN_KEYS]
    if model_file and not any(k in ("model", "m") for k, _ in kept):
        kept.insert(0, ("model", model_file))
    own = [(f.lstrip("-"), v) for f, v in pairs(log_args(variant))]
    return [f"[{name}]", *(f"{k} = {v}" for k, v in kept + own + preset_lines(variant)), ""]


def write_preset(path: Path, sections: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(line for s in sections for line in s))
    return path


def router_command(preset: Path) -> list[str]:
    """The router of the run's variants: one model at a time; nothing at router level that a section sets.

    The router's own arguments win over a preset's (llama.cpp's order: command line, then the section),
    so ``--threads`` or ``-lv`` here would overrule every variant's.
    """
    return ["--models-preset", str(preset), "--models-max", "1", "--no-webui"]


def single_command(name: str, base: BaseArgs, variant: tuple[str, ...], model_file: str | None,
                   groups: dict[str, frozenset[str]]) -> list[str]:
    """The command line of a single variant server: the base's, the variant's merged over it, its own name."""
    args = list(base.args)
    if model_file and not any(f in ("-m", "--model") for f, _ in pairs(args)):
        args = ["--model", model_file, *args]
    return [*merged(args, variant, groups), "--alias", name, *log_args(variant)]


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def log_path(folder: Path, run_id: int, label: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"run{run_id}-{_SAFE.sub('_', label)[:80]}.log"
    path.unlink(missing_ok=True)  # a file left by an earlier store at this path: this server's lines only
    return path
