"""``[load]`` and ``[depth]`` of a campaign: what the load and context steps ask, typed and bounded.

Both tables are optional; without them a run measures one request at a
time as before. Every error names the file and the dotted key (exit 2),
through the campaign reader's :class:`Checker`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import validate
from ..campaign_check import MAX_NUM_CTX, MAX_PLANNED_SAMPLES, MAX_TOKENS, Checker

MAX_STREAMS = 256  # concurrent requests of one step: one thread each
MAX_STEPS = 32  # steps per axis
MAX_REQUESTS_PER_STREAM = 1_000
MAX_DEPTH_REPETITIONS = 1_000
MAX_SLO_MS = 86_400_000.0
MAX_SLO_TPS = 1e6

_LOAD_KEYS = {"streams", "requests_per_stream", "prompt_class", "max_tokens", "slo"}
_SLO_KEYS = {"per_user_decode_tps", "ttft_p90_ms"}
_DEPTH_KEYS = {"tokens", "repetitions", "max_tokens"}


@dataclass(frozen=True)
class Slo:
    """A service level a load step meets or not; an unset bound is no condition."""

    per_user_decode_tps: float | None = None  # median decode tok/s of one request, at least
    ttft_p90_ms: float | None = None  # p90 time to first token, at most


@dataclass(frozen=True)
class LoadSettings:
    streams: tuple[int, ...]
    requests_per_stream: int
    prompt_class: str
    max_tokens: int
    slo: Slo | None = None

    def requests(self, streams: int) -> int:
        return streams * self.requests_per_stream


@dataclass(frozen=True)
class DepthSettings:
    tokens: tuple[int, ...]
    repetitions: int
    max_tokens: int


def _int_list(c: Checker, table: dict, key: str, prefix: str, lo: int, hi: int) -> tuple[int, ...]:
    """A non-empty list of distinct integers in [lo, hi], in the order given."""
    items = table.get(key)
    if not isinstance(items, list) or not items:
        c.fail(prefix + key, f"expected a non-empty list of integers from {lo:,} to {hi:,}, "
                             f"got {validate.describe(items)}")
    if len(items) > MAX_STEPS:
        c.fail(prefix + key, f"expected at most {MAX_STEPS} steps, got {len(items):,}")
    out: list[int] = []
    for i, item in enumerate(items):
        try:
            value = validate.integer(item, lo, hi)
        except validate.Invalid as exc:
            c.fail(f"{prefix}{key}[{i}]", str(exc))
        if value in out:
            c.fail(f"{prefix}{key}[{i}]", f"{value} is listed twice")
        out.append(value)
    return tuple(out)


def load_settings(c: Checker, data: dict, prompt_tokens: dict[str, int], max_tokens: int) -> LoadSettings | None:
    if "load" not in data:
        return None
    tab = c.table(data["load"], "load")
    c.unknown(tab, _LOAD_KEYS, "load.")
    streams = _int_list(c, tab, "streams", "load.", 1, MAX_STREAMS)
    cls = tab.get("prompt_class", "short")
    if not isinstance(cls, str) or cls not in prompt_tokens:
        c.fail("load.prompt_class", f"expected one of {', '.join(sorted(prompt_tokens))}, "
                                    f"got {validate.describe(cls)}")
    slo = None
    if "slo" in tab:
        st = c.table(tab["slo"], "load.slo")
        c.unknown(st, _SLO_KEYS, "load.slo.")
        if not st:
            c.fail("load.slo", f"expected at least one of {', '.join(sorted(_SLO_KEYS))}")
        slo = Slo(
            per_user_decode_tps=c.value(st, "per_user_decode_tps", "load.slo.",
                                        lambda v: validate.number(v, 0, MAX_SLO_TPS, above=True)),
            ttft_p90_ms=c.value(st, "ttft_p90_ms", "load.slo.",
                                lambda v: validate.number(v, 0, MAX_SLO_MS, above=True)),
        )
    settings = LoadSettings(
        streams=streams,
        requests_per_stream=c.integer(tab, "requests_per_stream", "load.", 2, 1, MAX_REQUESTS_PER_STREAM),
        prompt_class=cls,
        max_tokens=c.integer(tab, "max_tokens", "load.", max_tokens, 1, MAX_TOKENS),
        slo=slo,
    )
    total = sum(settings.requests(s) for s in streams)
    if total > MAX_PLANNED_SAMPLES:  # each request is a stored sample: a plan that cannot end is refused now
        c.fail("load.requests_per_stream", f"the load steps come to {total:,} requests per model "
                                           f"(streams x requests_per_stream); at most {MAX_PLANNED_SAMPLES:,}")
    return settings


def depth_settings(c: Checker, data: dict, max_tokens: int) -> DepthSettings | None:
    if "depth" not in data:
        return None
    tab = c.table(data["depth"], "depth")
    c.unknown(tab, _DEPTH_KEYS, "depth.")
    depth_max_tokens = c.integer(tab, "max_tokens", "depth.", max_tokens, 1, MAX_TOKENS)
    return DepthSettings(
        # a depth plus its answer must fit a context window somewhere: beyond the largest, no server could take it
        tokens=_int_list(c, tab, "tokens", "depth.", 0, MAX_NUM_CTX - depth_max_tokens),
        repetitions=c.integer(tab, "repetitions", "depth.", 3, 1, MAX_DEPTH_REPETITIONS),
        max_tokens=depth_max_tokens,
    )


def axes_settings(data: dict, path: str, prompt_tokens: dict[str, int], max_tokens: int) -> dict[str, Any]:
    """The campaign's ``load`` and ``depth`` fields (None where the table is absent)."""
    c = Checker(path)
    return {"load": load_settings(c, data, prompt_tokens, max_tokens), "depth": depth_settings(c, data, max_tokens)}


def planned_samples(load: LoadSettings | None, depth: DepthSettings | None, n_models: int) -> int:
    """How many samples the load and depth steps add to a run's plan (refused depth steps count too)."""
    per_model = (sum(load.requests(s) for s in load.streams) if load else 0) + \
        (len(depth.tokens) * depth.repetitions if depth else 0)
    return per_model * n_models
