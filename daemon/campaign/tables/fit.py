"""``[fit]`` of a campaign: which context sizes the fit test loads each model at, typed and bounded.

The fit test answers "does this model, at this context, fit on the cards?"
from evidence: for every context cardproof starts a llama-server of its own
with ``-c N`` (``daemon/run/load/fit.py``). What the campaign cannot know -- the
model's trained context -- is checked when the run reaches the model, and a
context beyond it is refused there with the reason.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import MAX_NUM_CTX, MAX_TOKENS, NAME_CHARS
from cardproof.daemon.campaign.schema import Section, Table
from cardproof.daemon.campaign.tables.load import Steps, _steps

_contexts = _steps(1, MAX_NUM_CTX)

MAX_LOAD_TIMEOUT_S = 3600.0
MAX_SERVER_ARGS = 64
MAX_PER_MODEL = 64
# cardproof sets these itself for every fit load; a second value would make the row lie about its context
OWN_FLAGS = frozenset({"-m", "--model", "-c", "--ctx-size", "--port", "--host", "-np", "--parallel",
                       "--models-preset", "-hf", "--hf-repo", "-mu", "--model-url"})
# the server's log is the test's evidence: an argument that silences or moves it would leave no verdict
LOG_FLAGS = frozenset({"--log-file", "--log-disable", "-lv", "--verbosity", "--log-verbosity", "-v",
                       "--verbose", "--log-colors", "-q", "--quiet"})


def _server_args(value: Any) -> tuple[str, ...]:
    args = validate.bounded_list(value, lambda v: validate.text(v, what="a non-empty string", max_chars=4096),
                                 expected="a list of strings", max_items=MAX_SERVER_ARGS, noun="arguments",
                                 non_empty=False, tuples=True)  # a tuple: settings built in code
    out = []
    for i, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in OWN_FLAGS:
            raise validate.Invalid(f"{validate.quoted(arg)} is set by cardproof for every fit load "
                                   f"(model file, context, slots, address)", at=(i,))
        if flag in LOG_FLAGS:
            raise validate.Invalid(f"{validate.quoted(arg)} would change the server's log, which is the "
                                   f"fit test's evidence", at=(i,))
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


def _per_model(value: Any) -> dict:
    """``[fit.per_model]``: model name -> its own list of contexts."""
    table = validate.table("models", MAX_PER_MODEL)(value)
    out = {}
    for name, contexts in table.items():
        try:
            validate.name(name, max_chars=NAME_CHARS)
        except validate.Invalid as exc:
            raise validate.Invalid(str(exc), at=(name,)) from None
        try:
            out[name] = _contexts(contexts)
        except validate.Invalid as exc:
            raise validate.Invalid(str(exc), at=(name, *exc.at)) from None
    return out


class FitSettings(Section):
    """``[fit]``: context sizes (tokens) each model is loaded at.

    ``contexts`` apply to ``models`` (unset: every campaign model);
    ``[fit.per_model]`` gives a model a list of its own (a large model's
    full context beside a small one's). At least one of the two is needed.
    """

    contexts: Steps(1, MAX_NUM_CTX) | None = None
    models: Annotated[tuple[str, ...], BeforeValidator(_model_names)] | None = None
    per_model: validate.checked(_per_model, dict) = Field(default_factory=dict)
    max_tokens: validate.Int(1, MAX_TOKENS) = 8  # the one short request that must be answered
    load_timeout_s: validate.Number(0, MAX_LOAD_TIMEOUT_S, above=True) = 600.0
    # added to cardproof's own (-ngl 999 --fit off): cache types, tensor split, flash attention, ...
    server_args: validate.checked(_server_args, tuple) = ()

    @model_validator(mode="after")
    def _some_contexts(self):
        if self.contexts is None and not self.per_model:
            raise validate.Invalid("expected contexts or a [fit.per_model] table", at=("contexts",))
        if self.contexts is None and self.models is not None:
            raise validate.Invalid("models needs contexts to apply to them", at=("models",))
        return self

    def plan(self, campaign_models: tuple[str, ...]) -> list[tuple[str, tuple[int, ...]]]:
        """(model, contexts) in the campaign's model order: a model's own list where it has one."""
        listed = set(self.models or campaign_models) if self.contexts is not None else set()
        return [(m, self.per_model.get(m) or self.contexts) for m in campaign_models
                if m in self.per_model or m in listed]


TABLE = Table("fit", FitSettings, order=1)
