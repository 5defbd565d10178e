"""``[load]`` of a campaign: what the load steps ask, typed and bounded (``[depth]``: ``depth.py``).

Both tables are optional; without them a run measures one request at a
time as before. They are pydantic sections declared as ``TABLE`` like any
other campaign table, so every error names the file and the dotted key
(exit 2). What needs another table (the prompt class, the campaign's
``max_tokens`` as default, the planned-sample bound, a depth's room for its
answer) is checked and filled in where the other cross-table checks are, in
``campaign/model.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import MAX_NUM_CTX, MAX_TOKENS, class_name
from cardproof.daemon.campaign.schema import Section, Table

MAX_STREAMS = 256  # concurrent requests of one step: one thread each
MAX_STEPS = 32  # steps per axis
MAX_REQUESTS_PER_STREAM = 1_000
MAX_RATE_RPS = 1_000.0  # offered requests per second of one rate step
MAX_REQUESTS_PER_RATE = 10_000
MAX_RATE_DURATION_S = 3_600.0
MAX_SEED = 2**63 - 1
DEFAULT_REQUESTS_PER_RATE = 8
MAX_SLO_MS = 86_400_000.0
MAX_SLO_TPS = 1e6


def _steps(lo: int, hi: int):
    """A check for a non-empty list of at most MAX_STEPS distinct integers in [lo, hi], order kept."""
    def check(items: Any) -> tuple[int, ...]:
        return tuple(validate.bounded_list(items, lambda v: validate.integer(v, lo, hi), distinct=True,
                                           expected=f"a non-empty list of integers from {lo:,} to {hi:,}",
                                           max_items=MAX_STEPS, noun="steps"))
    return check


def Steps(lo: int, hi: int) -> Any:  # noqa: N802 -- read as a type in model declarations
    return Annotated[tuple[int, ...], BeforeValidator(_steps(lo, hi))]


def _rates(items: Any) -> tuple[float, ...]:
    """A non-empty list of at most MAX_STEPS distinct finite rates above 0, order kept."""
    return tuple(validate.bounded_list(
        items, lambda v: validate.number(v, 0, MAX_RATE_RPS, above=True), distinct=True, max_items=MAX_STEPS,
        noun="steps", expected=f"a non-empty list of requests per second above 0 up to {MAX_RATE_RPS:,.0f}"))


Rates = Annotated[tuple[float, ...], BeforeValidator(_rates)]


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
    """``[load]``: concurrency steps (``streams``) and/or open-loop Poisson rate steps (``rates``).

    ``max_tokens`` unset: the campaign's (filled in by ``campaign.py``). A
    rate step sends ``requests_per_rate`` requests, or with ``duration_s``
    every arrival of the seeded schedule before that time; the schedule is a
    function of ``seed`` and the rate alone (:mod:`arrivals`), so the plan is
    known when the campaign is read and a run can be repeated exactly.
    """

    streams: Steps(1, MAX_STREAMS) | None = Field(
        default=None, description=f"a non-empty list of integers from 1 to {MAX_STREAMS}")
    requests_per_stream: validate.Int(1, MAX_REQUESTS_PER_STREAM) = 2
    rates: Rates | None = Field(
        default=None, description=f"a non-empty list of requests per second above 0 up to {MAX_RATE_RPS:,.0f}")
    requests_per_rate: validate.Int(1, MAX_REQUESTS_PER_RATE) | None = None
    duration_s: validate.Number(0, MAX_RATE_DURATION_S, above=True) | None = None
    seed: validate.Int(0, MAX_SEED) = 0
    prompt_class: validate.checked(class_name, str) = "short"
    max_tokens: validate.Int(1, MAX_TOKENS) | None = None
    slo: Slo | None = None

    @model_validator(mode="after")
    def _some_steps(self):
        if self.streams is None and self.rates is None:
            raise validate.Invalid(f"expected a non-empty list of integers from 1 to {MAX_STREAMS} "
                                   f"(or load.rates, or both)", at=("streams",))
        if self.requests_per_rate is not None and self.duration_s is not None:
            raise validate.Invalid("expected requests_per_rate or duration_s, not both", at=("duration_s",))
        if self.duration_s is None:
            for i, rate in enumerate(self.rates or ()):
                last = self.rate_schedule(rate)[-1]
                if not last <= MAX_RATE_DURATION_S:  # a rate so low its requests would take days to send
                    raise validate.Invalid(f"expected a rate whose {len(self.rate_schedule(rate)):,} arrivals fit "
                                           f"in {MAX_RATE_DURATION_S:,.0f} s; at {rate:g} requests/s the last one "
                                           f"is due after {last:,.0f} s (seed {self.seed})", at=("rates", i))
        else:
            for rate in self.rates or ():
                n = len(self.rate_schedule(rate, cap=MAX_REQUESTS_PER_RATE))
                if n > MAX_REQUESTS_PER_RATE:
                    raise validate.Invalid(f"the step at {rate:g} requests/s comes to more than "
                                           f"{MAX_REQUESTS_PER_RATE:,} requests in {self.duration_s:g} s",
                                           at=("duration_s",))
                if n == 0:  # the schedule is fixed by the seed: a step that would send nothing is known now
                    raise validate.Invalid(f"expected a duration long enough for one arrival: the step at "
                                           f"{rate:g} requests/s has none within {self.duration_s:g} s "
                                           f"(seed {self.seed})", at=("duration_s",))
        return self

    def requests(self, streams: int) -> int:
        return streams * self.requests_per_stream

    def rate_schedule(self, rate_rps: float, cap: int = MAX_REQUESTS_PER_RATE) -> list[float]:
        """Planned send times (seconds from the step's start) of the step at ``rate_rps``; at most ``cap``."""
        from cardproof.daemon.campaign.arrivals import poisson_schedule  # here: arrivals imports nothing of the campaign
        if self.duration_s is not None:
            return poisson_schedule(rate_rps, self.seed, duration_s=self.duration_s, cap=cap)
        return poisson_schedule(rate_rps, self.seed, count=self.requests_per_rate or DEFAULT_REQUESTS_PER_RATE)

    def total_requests(self) -> int:
        """Every request the load steps of one model send (streams and rates)."""
        total = sum(self.requests(s) for s in self.streams or ())
        for rate in self.rates or ():
            total += len(self.rate_schedule(rate))
        return total


TABLE = Table("load", LoadSettings, order=4)
