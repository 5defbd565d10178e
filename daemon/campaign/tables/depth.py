"""``[depth]`` of a campaign: the context-depth steps, typed and bounded (the steps: ``run/load/depth.py``)."""

from __future__ import annotations

from pydantic import Field

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import MAX_NUM_CTX, MAX_TOKENS
from cardproof.daemon.campaign.schema import Section, Table
from cardproof.daemon.campaign.tables.load import LoadSettings, Steps

MAX_DEPTH_REPETITIONS = 1_000


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
    per_model = (load.total_requests() if load else 0) + \
        (len(depth.tokens) * depth.repetitions if depth else 0)
    return per_model * n_models


TABLE = Table("depth", DepthSettings, order=5)
