"""Service level and knee of a run's load steps: what the article states and pass rules read.

The service level is the campaign's ``[load.slo]`` as frozen with the run;
every figure is computed from stored rows (:mod:`stats`), never stored.
"""

from __future__ import annotations

import sqlite3
import tomllib

from pydantic import ConfigDict

from .. import validate
from ..campaign_check import CampaignError, check_model
from ..schema import Section
from .campaign import LoadSettings, Slo
from .stats import StepFigures, run_steps

#: a step that raises aggregate throughput by less than this over the one before adds nothing: the knee
KNEE_GAIN = 1.10


class _LoadOnly(Section):
    model_config = ConfigDict(extra="ignore", frozen=True)  # the other tables are not judged here
    load: LoadSettings | None = None


def frozen_slo(campaign_text: str | None, where: str) -> Slo | None:
    """``[load.slo]`` of a frozen campaign text; raises CampaignError (one line) when unreadable.

    ``[load]`` is read by the campaign's own model; the prompt class is not
    checked against ``[prompts]`` here: only the service level is judged.
    """
    if not campaign_text:
        return None
    try:
        data = tomllib.loads(campaign_text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(where, "-", f"not valid TOML: {exc}") from None
    except RecursionError:  # the same words as the campaign reader's
        raise CampaignError(where, "-", f"not usable TOML: {validate.NESTED_TOO_DEEP}") from None
    load = check_model(_LoadOnly, data, where).load
    return load.slo if load else None


def meets(f: StepFigures, slo: Slo) -> tuple[bool, list[tuple[str, float | int | None]]]:
    """Whether a step meets the service level, and what failed: ``errors``, ``per_user``, ``ttft_p90``."""
    failed: list[tuple[str, float | int | None]] = []
    if f.errors:
        failed.append(("errors", f.errors))
    if slo.per_user_decode_tps is not None and (f.decode_tps.p50 is None or f.decode_tps.p50 < slo.per_user_decode_tps):
        failed.append(("per_user", f.decode_tps.p50))
    if slo.ttft_p90_ms is not None and (f.ttft_ms.p90 is None or f.ttft_ms.p90 > slo.ttft_p90_ms):
        failed.append(("ttft_p90", f.ttft_ms.p90))
    return not failed, failed


def knee(figures: list[StepFigures]) -> StepFigures | None:
    """The first step after which no later step raises aggregate output tok/s by ``KNEE_GAIN`` or more.

    None with fewer than two answered steps, or when the last step still
    gains (the knee lies beyond the sweep).
    """
    steps = [f for f in figures if f.output_tps and isinstance(f.step.get("streams"), int)]
    if len(steps) < 2:
        return None
    for i, f in enumerate(steps[:-1]):
        if max(g.output_tps for g in steps[i + 1:]) < KNEE_GAIN * f.output_tps:
            return f
    return None


def rule_values(conn: sqlite3.Connection, run_id: int, model_id: int, campaign_text: str | None) -> dict:
    """``load.max_streams_at_slo`` and ``load.knee_streams`` of one model, where the run has them.

    The first is 0 when no step meets the level, absent without a level or
    without steps; the second is absent where throughput still rises.
    """
    try:
        steps = [f for f in run_steps(conn, run_id, "load") if f.step["model_id"] == model_id]
    except sqlite3.OperationalError:  # a database from before load steps
        return {}
    if not steps:
        return {}
    out: dict = {}
    try:
        slo = frozen_slo(campaign_text, f"run {run_id} campaign")
    except CampaignError:
        slo = None  # a level that no longer reads decides nothing: the rule stays undecided
    if slo is not None:
        met = [f.step["streams"] for f in steps if isinstance(f.step["streams"], int) and meets(f, slo)[0]]
        out["load.max_streams_at_slo"] = float(max(met, default=0))
    k = knee(steps)
    if k is not None:
        out["load.knee_streams"] = float(k.step["streams"])
    return out
