"""Service level and knee of a run's load steps: what the article states and pass rules read.

The service level is the campaign's ``[load.slo]`` as frozen with the run;
every figure is computed from stored rows (:mod:`stats`), never stored.
"""

from __future__ import annotations

import sqlite3
import tomllib

from pydantic import ConfigDict

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import CampaignError, check_model
from cardproof.daemon.campaign.schema import Section
from cardproof.daemon.campaign.tables.load import LoadSettings, Slo
from cardproof.daemon.store.stats import StepFigures, run_steps

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


def step_x(f: StepFigures) -> float | None:
    """Where a step lies on its axis: streams of a stream step, the offered rate of a rate step."""
    key = "rate_rps" if f.step.get("axis") == "rate" else "streams"
    value = f.step.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value <= 0:
        return None  # a damaged value: the step is listed, but states no level and no knee
    return value


#: steps whose median answers differ by more than this factor are not compared by aggregate throughput
ANSWER_SPREAD = 1.2


def answers_unequal(figures: list[StepFigures]) -> tuple[float, float] | None:
    """(shortest, longest) median answer in tokens where the answered steps' answers differ by more than
    ``ANSWER_SPREAD``, else None. Aggregate tok/s counts the time to the first token of each request: a
    step of 8-token answers spends more of its time before the first token than one of 16-token answers,
    and its throughput is lower by that alone."""
    medians = [f.answer_tokens.p50 for f in figures if f.output_tps and f.answer_tokens.n]
    medians = [m for m in medians if m]
    if len(medians) < 2 or max(medians) <= ANSWER_SPREAD * min(medians):
        return None
    return min(medians), max(medians)


def knee(figures: list[StepFigures]) -> StepFigures | None:
    """The first step after which no later step raises aggregate output tok/s by ``KNEE_GAIN`` or more.

    Steps in the order of their axis (streams or offered rate). None with
    fewer than two answered steps, when the last step still gains (the
    knee lies beyond the sweep), or when the steps' answers differ in length
    (``answers_unequal``): their throughput is then not comparable.
    """
    steps = sorted((f for f in figures if f.output_tps and step_x(f) is not None), key=step_x)
    if len(steps) < 2 or answers_unequal(steps):
        return None
    for i, f in enumerate(steps[:-1]):
        if max(g.output_tps for g in steps[i + 1:]) < KNEE_GAIN * f.output_tps:
            return f
    return None


#: rule names per axis: the most of the axis meeting the level, and the knee
RULES = {"load": ("load.max_streams_at_slo", "load.knee_streams"),
         "rate": ("load.max_rate_at_slo", "load.knee_rate")}


def rule_values(conn: sqlite3.Connection, run_id: int, model_id: int, slo: Slo | None) -> dict:
    """``load.max_streams_at_slo``/``load.knee_streams`` and ``load.max_rate_at_slo``/``load.knee_rate``.

    Of one model, where the run has such steps, judged by ``slo``, the level of the campaign as parsed
    when the run froze it. A "max" is 0 when no step meets the level, absent without a level or
    without steps; a knee is absent where throughput still rises.
    """
    try:
        steps = [f for f in run_steps(conn, run_id) if f.step["model_id"] == model_id]
    except sqlite3.OperationalError:  # a database from before load steps
        return {}
    out: dict = {}
    if not any(f.step.get("axis") in RULES for f in steps):
        return out
    for axis, (at_slo, knee_name) in RULES.items():
        of_axis = [f for f in steps if f.step.get("axis") == axis]
        if not of_axis:
            continue
        if slo is not None:
            met = [step_x(f) for f in of_axis if step_x(f) is not None and meets(f, slo)[0]]
            out[at_slo] = float(max(met, default=0))
        k = knee(of_axis)
        if k is not None:
            out[knee_name] = float(step_x(k))
    return out
