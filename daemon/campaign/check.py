"""The campaign reader's limits, its error, and the ``[report]`` table read by the report side too.

Limits are what a run can carry out, not taste: a number outside them either
crashes a later step (an int beyond SQLite's 64 bits, a prompt built in
memory from ``target_tokens``), makes a run that cannot end, or is refused
by the server anyway. Each limit is stated here once, by name. The tables
themselves are declared in ``campaign_schema``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.schema import Section, first_problem
from cardproof.daemon.campaign.validate import Invalid

MAX_CAMPAIGN_BYTES = 1 << 20  # a campaign is a page of settings; the text is frozen into every run
MAX_REPETITIONS = 10_000  # per cell
MAX_TOKENS = 1_000_000  # max_tokens, probes.max_tokens and prompts.*.target_tokens (the prompt is built in memory)
MAX_NUM_CTX = 1 << 24  # Ollama's num_ctx: beyond any model's context window
MAX_REQUEST_TIMEOUT_S = 86_400.0  # one request may take a day, not longer
MAX_CODE_TIMEOUT_S = 3_600.0  # one coding probe's test run
MAX_PROBE_REPEAT = 100
MAX_MODELS = 1_000
MAX_PROMPT_CLASSES = 100
MAX_RULES = 100
MAX_PLANNED_SAMPLES = 1_000_000  # models x classes x reasoning x repetitions
MAX_GATE_THRESHOLD = 1e9  # seconds, tokens, chars or ms depending on the gate; finite is what matters
NAME_CHARS = 256


class CampaignError(Exception):
    """A campaign file that cannot be used; str() is the one-line message."""

    def __init__(self, path: str, key: str, message: str):
        self.path = path
        self.key = key
        # the path and key can carry any character a file name or TOML key can: escaped, one line
        super().__init__(f"{validate.shown(path, validate.PATH_CHARS)}: key '{validate.shown(key)}': {message}")


def class_name(value: Any) -> str:
    """A prompt class name: a name of at most 64 characters without ``.``.

    Rules refer to a class as ``decode.<class>``, so a dot would split it.
    Other characters stay allowed (``long-ctx``, ``32k``): campaigns frozen
    with such names are parsed again when their runs are reported.
    """
    out = validate.name(value, what="a prompt class name", max_chars=64)
    if "." in out:
        raise Invalid(f"expected a prompt class name without '.' (rules refer to it as decode.<class>), "
                      f"got {validate.describe(value)}")
    return out


DEFAULT_UNSTABLE_RATIO = 1.5  # max/min of a cell's decode samples beyond which the cell is noise, not a finding
MIN_UNSTABLE_RATIO = 1.01  # 1.0 would call every cell with two different samples unstable
MAX_UNSTABLE_RATIO = 100.0
MIN_UNSTABLE_INTERVAL_PCT = 0.5  # below this, sampling noise alone would mark almost every cell
MAX_UNSTABLE_INTERVAL_PCT = 100.0
DEFAULT_MIN_EFFECT_PCT = 5.0  # the smallest change between runs a trend page calls a step
MIN_MIN_EFFECT_PCT = 0.5  # below this, run-to-run noise would be called a step
MAX_MIN_EFFECT_PCT = 90.0


class ReportSettings(Section):
    """``[report]``: how the article judges what it may state.

    ``unstable_ratio``: a cell whose slowest and fastest decode sample differ
    by more than this factor is marked unstable and no finding is stated from it.
    ``unstable_interval_pct`` (optional, off when absent): a cell is also
    unstable when the bootstrap interval of its median reaches further than
    this many percent from the median (report/findings/stable.py).
    ``min_effect_pct``: the smallest change between runs that the trend pages
    call a step (report/history/), however clear the samples are.
    """

    unstable_ratio: validate.Number(MIN_UNSTABLE_RATIO, MAX_UNSTABLE_RATIO) = DEFAULT_UNSTABLE_RATIO
    unstable_interval_pct: validate.Number(MIN_UNSTABLE_INTERVAL_PCT, MAX_UNSTABLE_INTERVAL_PCT) | None = None
    min_effect_pct: validate.Number(MIN_MIN_EFFECT_PCT, MAX_MIN_EFFECT_PCT) = DEFAULT_MIN_EFFECT_PCT


class _ReportOnly(Section):
    model_config = ConfigDict(extra="ignore")  # the other tables are not read here
    report: ReportSettings = ReportSettings()


def report_settings(data: dict, path: str) -> dict:
    """``[report]`` of a parsed campaign as a dict (see :class:`ReportSettings`); CampaignError names the key."""
    return check_model(_ReportOnly, data, path).report.model_dump()


def check_model(model: type[BaseModel], data: Any, path: str) -> Any:
    """``model`` read from parsed TOML, or the CampaignError of its first problem (file, dotted key, expected)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CampaignError(path, *first_problem(exc, model)) from None
