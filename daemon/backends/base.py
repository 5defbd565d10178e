"""What every backend returns: samples with counters, loads with durations."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from cardproof.daemon.store.redact import strip_userinfo


class BackendError(Exception):
    """A request that did not produce a measurement.

    ``kind`` is one of ``connection`` (refused, reset, server died),
    ``timeout``, ``http`` (an error status) or ``protocol`` (an answer we
    cannot read). The message keeps the server's own text, but never the
    login of a ``http://user:password@host`` URL: it is stored for display.
    ``where`` names what could not be read (a field such as
    ``timings.predicted_n``, or ``body``) and ``detail`` what was found there
    (``value``, and for a body that is no JSON the parser's ``reason`` and
    ``at_char``): a verdict built on the error can name both, not just its kind.
    """

    def __init__(self, kind: str, text: str, *, status: int | None = None, partial: dict | None = None,
                 where: str | None = None, detail: dict | None = None):
        self.kind = kind
        self.text = strip_userinfo(text)
        self.status = status
        self.partial = partial or {}
        self.where = where
        self.detail = {k: strip_userinfo(v) if isinstance(v, str) else v for k, v in (detail or {}).items()}
        super().__init__(f"{kind}: {self.text}")


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
    # ms after sending at which each text-carrying chunk arrived: inter-token latency for load steps
    chunk_ms: list[float] = field(default_factory=list)


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


class PollingLoadWatcher:
    """Notices and times a load that happens inside a measured request.

    Subclasses say how to ask the server about one model (``_poll``: state
    ``ready``, ``loading`` or None when unreadable, and the port if known).
    The first poll runs before the request is sent: ``ready`` means no load
    is needed and the watcher ends at once; otherwise a thread polls beside
    the request until the server reports the model ready. (Polling only
    beside the request lost the race when the machine was busy and the load
    was quick.) Servers flip their status a little after the model can
    already serve, so ``stop`` gives it a moment, and the runner bounds the
    duration by the request's own time to first token.
    """

    def __init__(self, name: str, poll_s: float = 0.02):
        from ..store import utcnow

        self._utcnow = utcnow
        self.name = name
        self.poll_s = poll_s
        self.requested_at = utcnow()
        self.ready_at: str | None = None
        self.load_seconds: float | None = None
        self.port: int | None = None
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        state, _ = self._poll()
        self.load_seen = state not in ("ready", None)
        self._thread = threading.Thread(target=self._run, daemon=True)
        if self.load_seen:
            self._thread.start()

    def _poll(self) -> tuple[str | None, int | None]:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            state, port = self._poll()
            if state == "ready":
                self.load_seconds = time.perf_counter() - self._t0
                self.ready_at = self._utcnow()
                self.port = port
                return
            self._stop.wait(self.poll_s)

    def stop(self, settle_s: float = 2.0) -> None:
        if not self.load_seen:
            return
        self._thread.join(timeout=settle_s)
        self._stop.set()
        self._thread.join(timeout=2.0)
