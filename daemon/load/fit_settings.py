"""``[fit]`` of a campaign: which context sizes the fit test loads each model at, typed and bounded.

The fit test answers "does this model, at this context, fit on the cards?"
from evidence: for every context cardproof starts a llama-server of its own
with ``-c N`` (``daemon/load/fit.py``). What the campaign cannot know -- the
model's trained context -- is checked when the run reaches the model, and a
context beyond it is refused there with the reason.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from .. import validate
from ..campaign_check import MAX_NUM_CTX, MAX_TOKENS, NAME_CHARS
from ..schema import Section
from .campaign import Steps

MAX_LOAD_TIMEOUT_S = 3600.0
MAX_SERVER_ARGS = 64
# cardproof sets these itself for every fit load; a second value would make the row lie about its context
OWN_FLAGS = frozenset({"-m", "--model", "-c", "--ctx-size", "--port", "--host", "-np", "--parallel",
                       "--models-preset", "-hf", "--hf-repo", "-mu", "--model-url"})


def _server_args(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise validate.Invalid(f"expected a list of strings, got {validate.describe(value)}")
    if len(value) > MAX_SERVER_ARGS:
        raise validate.Invalid(f"expected at most {MAX_SERVER_ARGS} arguments, got {len(value):,}")
    out = []
    for i, item in enumerate(value):
        try:
            arg = validate.text(item, what="a non-empty string", max_chars=4096)
        except validate.Invalid as exc:
            raise validate.Invalid(str(exc), at=(i,)) from None
        if arg.split("=", 1)[0] in OWN_FLAGS:
            raise validate.Invalid(f"{validate.quoted(arg)} is set by cardproof for every fit load "
                                   f"(model file, context, slots, address)", at=(i,))
        out.append(arg)
    return tuple(out)


def _model_names(value: Any) -> tuple[str, ...]:
    names = validate.distinct("model")(value)
    for i, n in enumerate(names):
        try:
            validate.name(n, max_chars=NAME_CHARS)
        except validate.Invalid as exc:
            raise validate.Invalid(str(exc), at=(i,)) from None
    return names


class FitSettings(Section):
    """``[fit]``: context sizes (tokens) each model is loaded at; ``models`` unset: every campaign model."""

    contexts: Steps(1, MAX_NUM_CTX) = Field(
        description=f"a non-empty list of integers from 1 to {MAX_NUM_CTX:,}")
    models: Annotated[tuple[str, ...], BeforeValidator(_model_names)] | None = None
    max_tokens: validate.Int(1, MAX_TOKENS) = 8  # the one short request that must be answered
    load_timeout_s: validate.Number(0, MAX_LOAD_TIMEOUT_S, above=True) = 600.0
    # added to cardproof's own (-ngl 999 --fit off): cache types, tensor split, flash attention, ...
    server_args: validate.checked(_server_args, tuple) = ()
