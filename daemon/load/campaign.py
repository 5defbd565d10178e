"""``[load]`` and ``[depth]`` of a campaign: what the load and context steps ask, typed and bounded.

Both tables are optional; without them a run measures one request at a
time as before. They are pydantic sections registered with
``campaign_schema.register_section`` like any plug-in table, so every error
names the file and the dotted key (exit 2). What needs another table (the
prompt class, the campaign's ``max_tokens`` as default, the planned-sample
bound, a depth's room for its answer) is checked and filled in where the
other cross-table checks are, in ``campaign.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from .. import validate
from ..campaign_check import MAX_NUM_CTX, MAX_TOKENS, class_name
from ..schema import Section

MAX_STREAMS = 256  # concurrent requests of one step: one thread each
MAX_STEPS = 32  # steps per axis
MAX_REQUESTS_PER_STREAM = 1_000
MAX_DEPTH_REPETITIONS = 1_000
MAX_SLO_MS = 86_400_000.0
MAX_SLO_TPS = 1e6


def _steps(lo: int, hi: int):
    """A check for a non-empty list of at most MAX_STEPS distinct integers in [lo, hi], order kept."""
    def check(items: Any) -> tuple[int, ...]:
        if not isinstance(items, list) or not items:
            raise validate.Invalid(f"expected a non-empty list of integers from {lo:,} to {hi:,}, "
                                   f"got {validate.describe(items)}")
        if len(items) > MAX_STEPS:
            raise validate.Invalid(f"expected at most {MAX_STEPS} steps, got {len(items):,}")
        out: list[int] = []
        for i, item in enumerate(items):
            try:
                value = validate.integer(item, lo, hi)
            except validate.Invalid as exc:
                raise validate.Invalid(str(exc), at=(i,)) from None
            if value in out:
                raise validate.Invalid(f"{value} is listed twice", at=(i,))
            out.append(value)
        return tuple(out)
    return check


def Steps(lo: int, hi: int) -> Any:  # noqa: N802 -- read as a type in model declarations
    return Annotated[tuple[int, ...], BeforeValidator(_steps(lo, hi))]


class Slo(Section):
    """``[load.slo]``: a service level a load step meets or not; an unset bound is no condition."""

    per_user_decode_tps: validate.Number(0, MAX_SLO_TPS, above=True) | None = None  # median decode tok/s, at least
    ttft_p90_ms: validate.Number(0, MAX_SLO_MS, above=True) | None = None  # p90 time to first token, at most

    @model_validator(mode="after")
    def _some_bound(self):
        if self.per_user_decode_tps is None and self.ttft_p90_ms is None:
            raise validate.Invalid(f"expected at least one of {', '.join(sorted(type(self).model_fields))}")
        return self


class LoadSettings(Section):
    """``[load]``: concurrency steps. ``max_tokens`` unset: the campaign's (filled in by ``campaign.py``)."""

    streams: Steps(1, MAX_STREAMS) = Field(
        description=f"a non-empty list of integers from 1 to {MAX_STREAMS}")
    requests_per_stream: validate.Int(1, MAX_REQUESTS_PER_STREAM) = 2
    prompt_class: validate.checked(class_name, str) = "short"
    max_tokens: validate.Int(1, MAX_TOKENS) | None = None
    slo: Slo | None = None

    def requests(self, streams: int) -> int:
        return streams * self.requests_per_stream


class DepthSettings(Section):
    """``[depth]``: context-depth steps. ``max_tokens`` unset: the campaign's (filled in by ``campaign.py``).

    The per-item bound of ``tokens`` here is the largest context window;
    that a depth leaves room for its answer is checked once ``max_tokens`` is known.
    """

    max_tokens: validate.Int(1, MAX_TOKENS) | None = None  # first: the tokens' bound depends on it
    tokens: Steps(0, MAX_NUM_CTX) = Field(
        description=f"a non-empty list of integers from 0 to {MAX_NUM_CTX:,}")
    repetitions: validate.Int(1, MAX_DEPTH_REPETITIONS) = 3


def planned_samples(load: LoadSettings | None, depth: DepthSettings | None, n_models: int) -> int:
    """How many samples the load and depth steps add to a run's plan (refused depth steps count too)."""
    per_model = (sum(load.requests(s) for s in load.streams) if load else 0) + \
        (len(depth.tokens) * depth.repetitions if depth else 0)
    return per_model * n_models
