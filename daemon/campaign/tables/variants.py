"""``[variants]`` of a campaign: named sets of server arguments and axes cardproof expands, typed and bounded.

Each variant is the model's own load with some arguments changed, measured on
the same prompt classes as the model itself. A campaign names variants two ways:

* ``[variants.sets]``: named argument lists, ``kv8 = ["-ctk", "q8_0", "-ctv", "q8_0"]``;
* axes: ``threads = [1, 2]``, ``flash_attn = [false, true]``, ``cache_type = ["f16", "q8_0"]``,
  ``ubatch``, ``batch``, ``gpu_layers``, ``n_cpu_moe``, ``ctx_size``. Axes are crossed: two
  axes of two values are four variants (``t1_kvf16``, ``t1_kvq8_0``, ...), since a setting's
  effect can depend on another's (a quantised V cache needs flash attention).

Either way a variant's arguments are the allow-list of ``args.SETTINGS`` (:func:`check_args`):
the tuning arguments its load's log proves, each value in range, nothing that reads or writes
files, reaches the network or adds tools on a server cardproof starts.

A variant's name becomes part of a model name (``smollm2-q4_1~kv8``) and of a
rule name (``variant.kv8.decode.short``), so it is a rule-language identifier.
What needs other tables (models, prompt classes, the backend) is checked by
:func:`check_campaign`, called from ``campaign.py``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import MAX_NUM_CTX, MAX_REPETITIONS, NAME_CHARS, CampaignError
from cardproof.daemon.campaign.tables.load import Steps
from cardproof.daemon.campaign.schema import Section, Table
from cardproof.daemon.campaign.variant_args import (BY_FLAG, KV_TYPES, Setting, canonical, indexed_pairs,
                                                    ollama_options, refusal)

MAX_VARIANTS = 32  # per model: each is a load and a set of cells
MAX_ARGS = 64
MAX_LOAD_TIMEOUT_S = 3600.0
SEPARATOR = "~"  # model~variant: the variant's own model name, its own series in the history
_VARIANT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

#: axis -> (value -> name part, value -> server arguments), in the order names are built
AXES: dict[str, tuple[Any, Any]] = {
    "threads": (lambda v: f"t{v}", lambda v: ["--threads", str(v)]),
    "flash_attn": (lambda v: "faon" if v else "faoff", lambda v: ["--flash-attn", "on" if v else "off"]),
    "cache_type": (lambda v: f"kv{v}", lambda v: ["--cache-type-k", v, "--cache-type-v", v]),
    "ubatch": (lambda v: f"ub{v}", lambda v: ["--ubatch-size", str(v)]),
    "batch": (lambda v: f"b{v}", lambda v: ["--batch-size", str(v)]),
    "gpu_layers": (lambda v: f"ngl{v}", lambda v: ["--n-gpu-layers", str(v)]),
    "n_cpu_moe": (lambda v: f"cmoe{v}", lambda v: ["--n-cpu-moe", str(v)]),
    "ctx_size": (lambda v: f"c{v}", lambda v: ["--ctx-size", str(v)]),
}


@dataclass(frozen=True)
class Variant:
    """One variant: its name, the arguments it changes, and where it came from."""

    name: str
    args: tuple[str, ...]
    settings: tuple[tuple[str, Any], ...] = ()  # axis -> value, for a variant expanded from axes
    source: str = "set"  # set | axes


def derived_name(model: str, variant: str) -> str:
    """The variant's own model name: what the server is asked for, and its series in the history."""
    return f"{model}{SEPARATOR}{variant}"


def _variant_name(value: Any) -> str:
    if not isinstance(value, str) or not _VARIANT_NAME.fullmatch(value):
        raise validate.Invalid(f"a variant name is a letter or _ then up to 39 letters, digits or _ (it is read "
                               f"in rules as variant.<name>), got {validate.describe(value)}")
    return value


def check_args(value: Any) -> tuple[str, ...]:
    """A variant's argument list, each flag on the allow-list (``args.SETTINGS``) with a value in its range.

    Returned as the variant's server is given it: every spelling llama-server
    takes (``-t``, ``--threads``, ``--n_gpu_layers``, ``--threads=2``) is read
    as its option, and a ``--`` flag goes on with dashes and its value as the
    next argument (llama-server takes no ``--flag=value``, a router preset no
    underscore key). Only the tuning arguments the load's log proves are
    allowed: llama-server's other options read and write files, reach the
    network or add tools, and a campaign file must not hand those to a
    server cardproof starts.
    """
    args = validate.bounded_list(value, lambda v: validate.text(v, what="a non-empty string", max_chars=4096),
                                 expected="a non-empty list of server arguments", max_items=MAX_ARGS,
                                 noun="arguments", tuples=True)
    out: list[str] = []
    seen: dict[str, str] = {}
    for index, flag, arg_value in indexed_pairs(args):
        at = (index,)
        if not flag:
            raise validate.Invalid(f"{validate.quoted(arg_value)} follows no flag", at=at)
        name = canonical(flag)
        why = refusal(name)
        if why is not None:
            raise validate.Invalid(f"{validate.quoted(flag)} {why}", at=at)
        setting = BY_FLAG[name]
        if setting.name in seen and setting.kind != "tensors":  # -ot adds rules; any other option takes the last
            raise validate.Invalid(f"{validate.quoted(flag)} sets {setting.name} again (after "
                                   f"{validate.quoted(seen[setting.name])}): the log proves one value", at=at)
        seen[setting.name] = flag
        try:
            _check_value(setting, arg_value)
        except validate.Invalid as exc:
            raise validate.Invalid(f"{validate.quoted(flag)} {exc}", at=at) from None
        out += [name] if arg_value is None else [name, arg_value]
    return tuple(out)


_BUFFER_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")  # CPU, CUDA0, CUDA_Host, Vulkan1


def _check_value(setting: Setting, value: str | None) -> None:
    """``value`` as ``setting`` takes it; the message follows the flag as the user spelled it."""
    if setting.kind == "switch":
        if value is not None:
            raise validate.Invalid(f"takes no value, got {validate.quoted(value)}")
        return
    if value is None:
        if setting.kind == "fa":
            return  # a bare -fa: the switch of builds before 2025-08 (later builds need on, off or auto)
        raise validate.Invalid("needs a value")
    if setting.kind == "fa" and value not in ("on", "off", "auto"):
        raise validate.Invalid(f"takes on, off or auto, got {validate.quoted(value)}")
    if setting.kind == "text" and value not in KV_TYPES:
        raise validate.Invalid(f"takes one of {', '.join(KV_TYPES)}, got {validate.quoted(value)}")
    if setting.kind == "tensors":
        _check_overrides(value)
    if setting.kind != "int" or (setting.name == "gpu_layers" and value in ("auto", "all")):
        return  # -ngl auto / all: builds from 2025-12 on (the build decides, or every layer)
    words = " (or auto or all)" if setting.name == "gpu_layers" else ""
    if not re.fullmatch(r"[0-9]{1,9}", value) or not setting.low <= int(value) <= setting.high:
        raise validate.Invalid(f"takes a whole number from {setting.low:,} to {setting.high:,}{words}, got "
                               f"{validate.quoted(value)}")


def _check_overrides(value: str) -> None:
    """``-ot PATTERN=BUFFER[,PATTERN=BUFFER...]``, each pattern a regular expression the evidence can match."""
    for part in value.split(","):
        pattern, eq, buffer = part.partition("=")
        if not eq or not pattern or not _BUFFER_TYPE.fullmatch(buffer):
            raise validate.Invalid(f"takes PATTERN=BUFFER_TYPE[,...] (blk\\.0\\.ffn_up.*=CPU), got "
                                   f"{validate.quoted(part)}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise validate.Invalid(f"pattern {validate.quoted(pattern)} is no regular expression the log "
                                   f"can be matched with ({exc})") from None


def _sets(value: Any) -> dict[str, tuple[str, ...]]:
    table = validate.table("variants", MAX_VARIANTS)(value)
    out = {}
    for name, args in table.items():
        try:
            _variant_name(name)
            out[name] = check_args(args)
        except validate.Invalid as exc:
            raise validate.Invalid(str(exc), at=(name, *exc.at)) from None
    return out


def _flags(value: Any) -> tuple[bool, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, bool) for v in value) \
            or len(set(value)) != len(value):
        raise validate.Invalid(f"expected a list of true and false, each once, got {validate.describe(value)}")
    return tuple(value)


def _cache_types(value: Any) -> tuple[str, ...]:
    names = validate.distinct("cache type")(value)
    for i, n in enumerate(names):
        if n not in KV_TYPES:
            raise validate.Invalid(f"expected one of {', '.join(KV_TYPES)}, got {validate.quoted(n)}", at=(i,))
    return names


def _names(what: str):
    def check(value: Any) -> tuple[str, ...]:
        names = validate.distinct(what)(value)
        for i, n in enumerate(names):
            try:
                validate.name(n, max_chars=NAME_CHARS)
            except validate.Invalid as exc:
                raise validate.Invalid(str(exc), at=(i,)) from None
        return names
    return check


class VariantSettings(Section):
    """``[variants]``: server settings each model is loaded with besides its own, on the same cells."""

    models: Annotated[tuple[str, ...], BeforeValidator(_names("model"))] | None = None  # unset: every model
    prompt_classes: Annotated[tuple[str, ...], BeforeValidator(_names("prompt class"))] | None = None
    repetitions: validate.Int(1, MAX_REPETITIONS) | None = None  # unset: the campaign's
    load_timeout_s: validate.Number(0, MAX_LOAD_TIMEOUT_S, above=True) = 600.0
    threads: Steps(1, 4096) | None = None
    flash_attn: validate.checked(_flags, tuple) | None = None
    cache_type: Annotated[tuple[str, ...], BeforeValidator(_cache_types)] | None = None
    ubatch: Steps(1, 1 << 20) | None = None
    batch: Steps(1, 1 << 20) | None = None
    gpu_layers: Steps(0, 100_000) | None = None
    n_cpu_moe: Steps(0, 100_000) | None = None
    ctx_size: Steps(1, MAX_NUM_CTX) | None = None
    sets: validate.checked(_sets, dict) = Field(default_factory=dict)
    # llama-swap: the user's config, whose base entries the run's generated config starts from (read only)
    llama_swap_config: validate.FilePath | None = None

    @model_validator(mode="after")
    def _some_variant(self):
        variants = self.variants()
        if not variants:
            raise validate.Invalid("expected an axis (threads, flash_attn, cache_type, ubatch, batch, gpu_layers, "
                                   "n_cpu_moe, ctx_size) or a [variants.sets] table", at=("sets",))
        if len(variants) > MAX_VARIANTS:
            raise validate.Invalid(f"the axes and sets come to {len(variants):,} variants per model; at most "
                                   f"{MAX_VARIANTS}", at=("sets",))
        for axis, values in self.axes():  # what an axis expands to meets the same allow-list as a set
            for i, v in enumerate(values):
                try:
                    check_args(AXES[axis][1](v))
                except validate.Invalid as exc:
                    raise validate.Invalid(str(exc), at=(axis, i)) from None
        seen: set[str] = set()
        for v in variants:
            if v.name in seen:
                raise validate.Invalid(f"the variant name {v.name!r} is both a set and an expanded axis",
                                       at=("sets", v.name))
            seen.add(v.name)
        return self

    def axes(self) -> list[tuple[str, tuple]]:
        return [(axis, getattr(self, axis)) for axis in AXES if getattr(self, axis) is not None]

    def variants(self) -> list[Variant]:
        """The named sets in file order, then the axes' grid."""
        out = [Variant(name, args) for name, args in self.sets.items()]
        axes = self.axes()
        if axes:
            for combo in itertools.product(*(values for _, values in axes)):
                named = [AXES[axis][0](v) for (axis, _), v in zip(axes, combo)]
                args = [a for (axis, _), v in zip(axes, combo) for a in AXES[axis][1](v)]
                out.append(Variant("_".join(named), tuple(args), tuple((a, v) for (a, _), v in zip(axes, combo)),
                                   "axes"))
        return out

    def plan(self, campaign_models: tuple[str, ...]) -> list[tuple[str, Variant]]:
        """(model, variant) in the campaign's model order, each model's variants in :meth:`variants` order."""
        chosen = set(self.models or campaign_models)
        return [(m, v) for m in campaign_models if m in chosen for v in self.variants()]


#: why a backend cannot run variants at all
REFUSED_BACKENDS = {
    "openai": "an OpenAI-compatible server is reached through its API only: cardproof can neither start it "
              "with other arguments nor pass them per request",
}


def check_campaign(settings: VariantSettings | None, *, path: str, backend: str, models: list[str],
                   classes: tuple[str, ...], prompt_tokens: dict[str, int], max_tokens: int,
                   reasoning_reps: list[int]) -> int:
    """``[variants]`` against the rest of the campaign; returns the samples the variants add to the plan."""
    if settings is None:
        return 0
    if backend in REFUSED_BACKENDS:
        raise CampaignError(path, "variants", f"backend {backend} cannot run variants: {REFUSED_BACKENDS[backend]}")
    if backend == "llama-swap" and settings.llama_swap_config is None:
        raise CampaignError(path, "variants.llama_swap_config", "llama-swap starts each model by the cmd of its "
                            "config entry and takes no other arguments: name your llama-swap config file, whose "
                            "entries the run's generated config starts from")
    if backend != "llama-swap" and settings.llama_swap_config is not None:
        raise CampaignError(path, "variants.llama_swap_config", f"only the llama-swap backend reads it (backend is "
                            f"{backend})")
    for i, name in enumerate(settings.models or ()):
        if name not in models:
            raise CampaignError(path, f"variants.models[{i}]", f"unknown model {validate.quoted(name)} "
                                f"(models: {', '.join(models)})")
    for i, cls in enumerate(settings.prompt_classes or ()):
        if cls not in classes:
            raise CampaignError(path, f"variants.prompt_classes[{i}]", f"prompt class {validate.quoted(cls)} is not "
                                f"measured on the models themselves (campaign.prompt_classes: {', '.join(classes)}): "
                                "a variant is compared with its model on the same cells")
    variants = settings.variants()
    for name in settings.models or models:
        for v in variants:
            if derived_name(name, v.name) in models:
                raise CampaignError(path, "variants", f"the variant {v.name!r} of {name!r} would be named "
                                    f"{derived_name(name, v.name)!r}, which is already a model of the campaign")
    used = settings.prompt_classes or classes
    need = max(prompt_tokens[c] for c in used) + max_tokens
    for i, ctx in enumerate(settings.ctx_size or ()):
        if ctx < need:
            raise CampaignError(path, f"variants.ctx_size[{i}]", f"a context of {ctx:,} tokens cannot hold the "
                                f"largest prompt class with its answer ({need:,} tokens)")
    if backend == "ollama":  # Ollama takes a few settings per request; the rest it cannot vary per model
        for axis, values in settings.axes():
            _, refused = ollama_options(AXES[axis][1](values[0]))
            if refused:
                raise CampaignError(path, f"variants.{axis}", f"Ollama cannot set this per model: {refused[0]}")
        for name, args in settings.sets.items():
            _, refused = ollama_options(args)
            if refused:
                raise CampaignError(path, f"variants.sets.{name}", f"Ollama cannot set variant {name!r}: "
                                    f"{refused[0]}")
    n_models = len(settings.models or models)
    reps = [settings.repetitions or r for r in reasoning_reps]
    return n_models * len(variants) * len(used) * sum(reps)


TABLE = Table("variants", VariantSettings, order=2)
