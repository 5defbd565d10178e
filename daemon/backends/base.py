"""What every backend returns: samples with counters, loads with durations."""

from __future__ import annotations

from dataclasses import dataclass, field


class BackendError(Exception):
    """A request that did not produce a measurement.

    ``kind`` is one of ``connection`` (refused, reset, server died),
    ``timeout``, ``http`` (an error status) or ``protocol`` (an answer we
    cannot read). The message keeps the server's own text.
    """

    def __init__(self, kind: str, text: str, *, status: int | None = None, partial: dict | None = None):
        self.kind = kind
        self.text = text
        self.status = status
        self.partial = partial or {}
        super().__init__(f"{kind}: {text}")


@dataclass
class SampleResult:
    prompt_tokens: int | None
    generated_tokens: int | None
    prompt_ms: float | None
    predicted_ms: float | None
    prefill_tps: float | None
    decode_tps: float | None
    ttft_ms: float | None
    wall_ms: float
    stop_reason: str | None
    answer_chars: int
    reasoning_chars: int
    draft_tokens: int | None
    draft_accepted: int | None
    cached_tokens: int | None
    counter_source: str
    request: dict = field(default_factory=dict)
    response: dict = field(default_factory=dict)


@dataclass
class LoadResult:
    model: str
    requested_at: str
    ready_at: str | None
    load_seconds: float | None
    status: str  # loaded | failed | already_loaded
    error_text: str | None = None
    pid: int | None = None
    port: int | None = None
