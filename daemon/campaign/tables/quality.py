"""``[quality]`` of a campaign: which models and variants are measured against their ladder's base, and how.

``context`` tokens per chunk and ``chunks`` of the shipped text
(``text.py``) are what llama-perplexity reads; ``binary`` names another
llama-perplexity than the one the ``server`` extra builds. What needs other
tables (the models named, the variants of ``[variants]``) is checked by
:func:`check_campaign`, called from ``campaign.py``; what only the run can
know (the model files, their tokenizers, the text's token count for this
tokenizer) is refused at run time with the reason.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import MAX_NUM_CTX, NAME_CHARS, CampaignError
from cardproof.daemon.campaign.schema import Section, Table
from cardproof.daemon.quality import text

MAX_CHUNKS = 10_000
MAX_TIMEOUT_S = 86_400.0
#: variant arguments that describe serving, not the model's answers: llama-perplexity gets its own
SERVING_ONLY = frozenset({"ctx_size", "parallel"})


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


class QualitySettings(Section):
    """``[quality]``: KL divergence of each ladder member and variant against the ladder's base."""

    models: Annotated[tuple[str, ...], BeforeValidator(_names("model"))] | None = None  # unset: every model
    variants: Annotated[tuple[str, ...], BeforeValidator(_names("variant"))] = ()  # [variants] names
    context: validate.Int(16, MAX_NUM_CTX) = 512  # tokens per chunk (llama-perplexity -c)
    chunks: validate.Int(1, MAX_CHUNKS) = 8
    threads: validate.Int(1, 4096) | None = None  # unset: llama-perplexity's own choice
    binary: validate.FilePath | None = None  # unset: the llama-perplexity the server extra builds
    timeout_s: validate.Number(0, MAX_TIMEOUT_S, above=True) = 1800.0  # per llama-perplexity process

    def tokens(self) -> int:
        """The tokens of text the measurement reads; llama-perplexity needs two contexts' worth at least."""
        return self.context * max(self.chunks, 2)


def check_campaign(settings: QualitySettings | None, *, path: str, models: list[str], variants) -> None:
    """``[quality]`` against the rest of the campaign (``variants``: the parsed ``[variants]`` or None)."""
    if settings is None:
        return
    for i, name in enumerate(settings.models or ()):
        if name not in models:
            raise CampaignError(path, f"quality.models[{i}]", f"unknown model {validate.quoted(name)} "
                                f"(models: {', '.join(models)})")
    chosen = set(settings.models or models)
    known = {v.name: v for v in variants.variants()} if variants is not None else {}
    planned = variants.plan(tuple(models)) if variants is not None else []
    for i, name in enumerate(settings.variants):
        if name not in known:
            raise CampaignError(path, f"quality.variants[{i}]", f"unknown variant {validate.quoted(name)} "
                                f"(its [variants]: {', '.join(known) or 'none'})")
        if not any(v.name == name and m in chosen for m, v in planned):
            raise CampaignError(path, f"quality.variants[{i}]", f"variant {validate.quoted(name)} runs on no model "
                                "of quality.models: it is measured against its own model's ladder")
    limit = text.max_tokens()
    if settings.tokens() > limit:
        raise CampaignError(path, "quality.chunks" if settings.chunks > 2 else "quality.context",
                            f"{max(settings.chunks, 2):,} chunks of {settings.context:,} tokens need "
                            f"{settings.tokens():,} tokens; the shipped text ({text.ALICE.name}, "
                            f"{text.ALICE.size_bytes:,} bytes) holds at most {limit:,} for any tokenizer")


def perplexity_args(args: tuple[str, ...]) -> list[str]:
    """A variant's arguments as llama-perplexity takes them: those that only shape serving left out."""
    from cardproof.daemon.campaign.variant_args import BY_FLAG, indexed_pairs

    out: list[str] = []
    for _, flag, value in indexed_pairs(list(args)):
        setting = BY_FLAG.get(flag)
        if setting is not None and setting.name in SERVING_ONLY:
            continue
        out += [flag] if value is None else [flag, value]
    return out


TABLE = Table("quality", QualitySettings, order=3)
