"""Server arguments of a variant: read into settings, merged over the base's, written as a preset or options.

A variant is the base model's own server arguments with some of them
changed. Three readers need the same knowledge of llama-server's flags:

* the evidence check (``evidence.py``): which flag states which fact of the
  load's log (``-t 1`` -> ``n_threads = 1``);
* the merge over the base's arguments: a variant's ``-t 1`` replaces the
  base's ``--threads 2`` (both spellings are one option), never sits beside it;
* the backends that do not take arguments: Ollama takes a few settings as
  request options (``num_thread``...), and refuses the rest with the reason.

:data:`SETTINGS` is also the allow-list of a campaign's variant arguments
(``settings.check_args``): a variant may set only what its load's log can
prove, with a value in the setting's range. Any other flag is refused at
parse time, since llama-server's other options read and write files
(``--path``, ``--log-file``, ``--slot-save-path``), reach the network
(``-hfr``, ``--rpc``) or add tools: none of that is a tuning argument, and a
campaign file must not hand it to a server cardproof starts. (A run stored
before the allow-list may hold other flags; the evidence says "not checked".)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cardproof.daemon.campaign.check import MAX_NUM_CTX

#: KV cache types llama-server takes for -ctk / -ctv (common/arg.cpp kv_cache_types)
KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


@dataclass(frozen=True)
class Setting:
    """One server option: its spellings, the log fact that proves it, and its Ollama request option."""

    name: str
    flags: tuple[str, ...]  # every spelling; the last ``--`` one is llama-server's own (its preset key)
    fact: str  # the fact of the load's log that states the value in effect
    kind: str  # int | text | fa (on/off/auto, or bare in builds before 2025-08) | tensors (an override pattern) | switch
    ollama: str | None = None  # the request option Ollama takes for it, where it has one
    low: int = 0  # an int setting's range in a campaign: llama-server's "-1 = auto" and the like are refused,
    high: int = 0  # since the log would then state the server's choice, not the campaign's

    @property
    def long(self) -> str:
        return [f for f in self.flags if f.startswith("--")][-1]


SETTINGS: tuple[Setting, ...] = (
    Setting("threads", ("-t", "--threads"), "n_threads", "int", "num_thread", 1, 4096),
    Setting("threads_batch", ("-tb", "--threads-batch"), "n_threads_batch", "int", None, 1, 4096),
    Setting("flash_attn", ("-fa", "--flash-attn"), "flash_attn", "fa"),
    Setting("cache_type_k", ("-ctk", "--cache-type-k"), "kv_cache_type_k", "text"),
    Setting("cache_type_v", ("-ctv", "--cache-type-v"), "kv_cache_type_v", "text"),
    Setting("ubatch", ("-ub", "--ubatch-size"), "n_ubatch", "int", None, 1, 1 << 20),
    Setting("batch", ("-b", "--batch-size"), "n_batch", "int", "num_batch", 1, 1 << 20),
    # also "auto" and "all" (builds from 2025-12 on); -1 and -2 are their numbers, refused for the words
    Setting("gpu_layers", ("-ngl", "--gpu-layers", "--n-gpu-layers"), "offloaded_layers", "int", "num_gpu", 0,
            100_000),
    Setting("n_cpu_moe", ("-ncmoe", "--n-cpu-moe"), "tensor_override", "int", None, 0, 100_000),
    Setting("cpu_moe", ("-cmoe", "--cpu-moe"), "tensor_override", "switch"),
    Setting("override_tensor", ("-ot", "--override-tensor"), "tensor_override", "tensors"),
    Setting("ctx_size", ("-c", "--ctx-size"), "ctx_size", "int", "num_ctx", 0, MAX_NUM_CTX),  # 0: the model's own
    Setting("parallel", ("-np", "--parallel"), "slots", "int", None, 1, 1024),
)
BY_FLAG: dict[str, Setting] = {f: s for s in SETTINGS for f in s.flags}

# cardproof sets these for every variant server (file, address, name) or reads the log they would move
OWN_FLAGS = frozenset({"-m", "--model", "--port", "--host", "-a", "--alias", "--models-preset", "--models-dir",
                       "--models-max", "--models-autoload", "--no-models-autoload", "-hf", "--hf-repo", "-hff",
                       "--hf-file", "-mu", "--model-url", "--api-key", "--api-key-file"})
LOG_FLAGS = frozenset({"--log-file", "--log-disable", "-lv", "--verbosity", "--log-verbosity", "-v", "--verbose",
                       "--log-colors", "-q", "--quiet", "--log-prefix", "--log-timestamps"})
KEY_FLAGS = frozenset({"--api-key", "--api-key-file"})


def canonical(flag: str) -> str:
    """The flag as llama-server reads it: a ``--`` flag's underscores are dashes (``--log_file`` is ``--log-file``).

    common/arg.cpp rewrites them before looking a flag up, so every check of a
    flag must see this spelling, or ``--api_key`` passes where ``--api-key`` is refused.
    """
    return flag.replace("_", "-") if flag.startswith("--") else flag


def refusal(flag: str) -> str | None:
    """Why a variant may not set ``flag`` (in :func:`canonical` spelling); None where it is a tuning argument."""
    if flag in KEY_FLAGS:
        return "would make the variant's server refuse cardproof's own requests"
    if flag in OWN_FLAGS:
        return "is set by cardproof for every variant (model file, address, name)"
    if flag in LOG_FLAGS:
        return "would change the server's log, which is the variant's evidence"
    if flag not in BY_FLAG:
        return (f"is not a tuning argument cardproof proves from the load's log; a variant sets only "
                f"{allowed_text()} (an option that reads or writes files, reaches the network or adds tools never "
                f"goes to a server cardproof starts)")
    return None


def allowed_text() -> str:
    """The allow-list as a reader writes it: ``-t/--threads, -tb/--threads-batch, ...``."""
    return ", ".join("/".join(s.flags) for s in SETTINGS)


def _is_flag(token: str) -> bool:
    """``-t`` or ``--threads``, not a negative number (``-1`` is a value)."""
    return token.startswith("-") and len(token) > 1 and not re.fullmatch(r"-\d+(\.\d+)?", token)


def indexed_pairs(args: list[str] | tuple[str, ...]) -> list[tuple[int, str, str | None]]:
    """``[(index, flag, value or None)]``: ``--flag=value`` split, a flag's value is the next token that is no flag.

    A value with no flag before it has the flag ``""``: kept, so nothing the user wrote is dropped silently.
    """
    out: list[tuple[int, str, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        if _is_flag(token) and "=" in token and token.startswith("--"):
            flag, value = token.split("=", 1)
            out.append((i, flag, value))
            i += 1
        elif _is_flag(token):
            value = args[i + 1] if i + 1 < len(args) and not _is_flag(args[i + 1]) else None
            out.append((i, token, value))
            i += 2 if value is not None else 1
        else:
            out.append((i, "", token))
            i += 1
    return out


def pairs(args: list[str] | tuple[str, ...]) -> list[tuple[str, str | None]]:
    """``[(flag, value or None)]`` of :func:`indexed_pairs`."""
    return [(flag, value) for _, flag, value in indexed_pairs(args)]


def flat(items: list[tuple[str, str | None]]) -> list[str]:
    out: list[str] = []
    for flag, value in items:
        out += [t for t in (flag, value) if t]
    return out


def spellings(flag: str, groups: dict[str, frozenset[str]] | None = None) -> frozenset[str]:
    """Every spelling of ``flag``'s option: from :data:`SETTINGS`, else the binary's ``--help`` groups."""
    if flag in BY_FLAG:
        return frozenset(BY_FLAG[flag].flags)
    if groups and flag in groups:
        return groups[flag]
    return frozenset({flag})


_HELP_LINE = re.compile(r"^(-[^\s,]+(?:,\s+-[^\s,]+)*)", re.MULTILINE)


def help_groups(help_text: str) -> dict[str, frozenset[str]]:
    """flag -> all spellings of its option, from llama-server's ``--help``.

    A help line lists them before the value: ``-ngl,  --gpu-layers, --n-gpu-layers N``.
    """
    out: dict[str, frozenset[str]] = {}
    for m in _HELP_LINE.finditer(help_text or ""):
        group = frozenset(f.strip() for f in m[1].split(",") if f.strip())
        for f in group:
            out[f] = group
    return out


def merged(base: list[str], variant: list[str] | tuple[str, ...],
           groups: dict[str, frozenset[str]] | None = None) -> list[str]:
    """The base's arguments with every option the variant sets taken out, then the variant's.

    llama.cpp takes the last of two values too, but an argument list that
    names a setting twice is not one a reader can check at a glance.
    """
    changed: set[str] = set()
    for flag, _ in pairs(variant):
        if flag:
            changed |= spellings(flag, groups)
    kept = [(f, v) for f, v in pairs(base) if f not in changed]
    return flat(kept) + list(variant)


def preset_lines(variant: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """``(key, value)`` lines of a router preset for the variant's arguments.

    The router reads an option under any of its spellings without the dashes
    (``ctk = q8_0``, ``n-gpu-layers = 10``); a flag without a value is ``true``.
    """
    return [(flag.lstrip("-"), value if value is not None else "true") for flag, value in pairs(variant) if flag]


def preset_keys(flag: str, groups: dict[str, frozenset[str]] | None = None) -> frozenset[str]:
    """The preset keys that name ``flag``'s option (each spelling without its dashes)."""
    return frozenset(s.lstrip("-") for s in spellings(flag, groups))


@dataclass(frozen=True)
class Expectation:
    """What the load's log must say for one argument of the variant to have taken."""

    flag: str
    value: str | None
    setting: Setting | None  # None: a flag cardproof does not read (passed through, not checked)


def expectations(variant: list[str] | tuple[str, ...]) -> list[Expectation]:
    return [Expectation(flag, value, BY_FLAG.get(flag)) for flag, value in pairs(variant) if flag]


def ollama_options(variant: list[str] | tuple[str, ...]) -> tuple[dict, list[str]]:
    """(request options, reasons it cannot be set) for an Ollama variant.

    Ollama starts its runner itself and takes only a few settings per request;
    the rest (flash attention, KV cache type) are server-wide environment
    settings, or not settable at all: such a variant is refused with the reason.
    """
    options: dict = {}
    refused: list[str] = []
    for flag, value in pairs(variant):
        setting = BY_FLAG.get(flag)
        if setting is None or setting.ollama is None:
            why = OLLAMA_NO_OPTION.get(setting.name if setting else "", "Ollama has no request option for it")
            refused.append(f"{flag or value}: {why}")
            continue
        try:
            options[setting.ollama] = int(value or "")
        except ValueError:
            refused.append(f"{flag}: expected a whole number, got {value!r}")
    return options, refused


OLLAMA_NO_OPTION = {
    "flash_attn": "Ollama sets flash attention for the whole server (OLLAMA_FLASH_ATTENTION), not per request",
    "cache_type_k": "Ollama sets the KV cache type for the whole server (OLLAMA_KV_CACHE_TYPE), not per request",
    "cache_type_v": "Ollama sets the KV cache type for the whole server (OLLAMA_KV_CACHE_TYPE), not per request",
    "ubatch": "Ollama has no request option for the physical batch (num_batch sets the logical batch)",
    "threads_batch": "Ollama has no request option for the prompt-processing threads",
    "n_cpu_moe": "Ollama has no request option to keep experts on the CPU",
    "cpu_moe": "Ollama has no request option to keep experts on the CPU",
    "override_tensor": "Ollama has no request option for tensor overrides",
    "parallel": "Ollama sets the parallel requests for the whole server (OLLAMA_NUM_PARALLEL), not per request",
}
