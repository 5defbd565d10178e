"""llama-swap: each variant an entry of a config cardproof generates for the run, served by a llama-swap of its own.

llama-swap starts each model's upstream by the ``cmd`` of its entry in the
user's config (``llama-server --port ${PORT} -m ...``); it has no API to
start one with other arguments. So, as with a router's preset, cardproof
writes a config for the run -- each variant the base's entry, its ``cmd`` with
the variant's arguments merged in and the log settings the evidence needs --
and starts ``llama-swap`` on it (the binary from ``CARDPROOF_LLAMA_SWAP`` or
the ``PATH``). The user's config is read, never written. llama-swap's macros
and other top-level settings are kept, so ``${PORT}`` and ``${llama-server}``
mean what they mean in the user's file; an entry's ``aliases`` are dropped, as
they would claim the base's names.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import yaml

from cardproof.daemon.campaign.variant_args import merged
from cardproof.daemon.run.variants.servers import log_args

SWAP_BINARY_ENV = "CARDPROOF_LLAMA_SWAP"


class SwapConfigError(Exception):
    """The user's llama-swap config cannot be read, or lacks the base model's entry."""


def read_config(path: str | Path) -> dict:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SwapConfigError(f"cannot read the llama-swap config {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise SwapConfigError(f"the llama-swap config {path} has no models table")
    return data


def variant_entry(config: dict, base: str, variant: tuple[str, ...], groups=None) -> dict:
    """The base's entry with the variant's arguments merged into its ``cmd``."""
    entry = config["models"].get(base)
    if not isinstance(entry, dict) or not isinstance(entry.get("cmd"), str):
        raise SwapConfigError(f"the llama-swap config has no entry with a cmd for {base!r}")
    words = shlex.split(entry["cmd"])
    cmd = [words[0], *merged(words[1:], variant, groups), *log_args(variant)]
    return {k: v for k, v in entry.items() if k not in ("cmd", "aliases")} | {"cmd": shlex.join(cmd)}


def generated_config(config: dict, entries: dict[str, dict]) -> dict:
    """The run's config: the user's top-level settings (macros included), the variants' entries as its models."""
    return {k: v for k, v in config.items() if k not in ("models", "groups", "hooks")} | {"models": entries}


def write_config(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def find_binary() -> Path | None:
    env = os.environ.get(SWAP_BINARY_ENV)
    if env:
        return Path(env) if Path(env).is_file() else None
    found = shutil.which("llama-swap")
    return Path(found) if found else None
