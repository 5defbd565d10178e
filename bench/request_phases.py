"""Where one runner request's milliseconds go: ``time.perf_counter`` around each phase.

Used by ``bench/runner_overhead.py --phases``. Each phase is a function of
the runner's per-request path, wrapped for the length of one block; the
time a phase spends inside another wrapped phase is counted there only
(exclusive times), so the phases add up to the request's interval and the
rest is "unattributed" (the runner's own loop, the GIL, the scheduler).

The wrappers replace module attributes and put them back afterwards; they
change what is timed, never what is stored.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack, contextmanager

from cardproof.daemon import judge, runner, run_record, sampling
from cardproof.daemon.backends import llamaserver
from cardproof.daemon.backends.base import PollingLoadWatcher
from cardproof.daemon.backends.llamaserver import LlamaServerBackend

# (owner, attribute, phase): what runs once per request, in order
PHASES = (
    (runner, "build_prompt", "build the prompt"),
    (sampling, "new_nonce", "build the prompt"),
    (LlamaServerBackend, "watch_load", "load watcher: poll before (GET /models)"),
    (LlamaServerBackend, "request_body", "build the request body"),
    (llamaserver, "read_stream", "stream: send, read, parse chunks"),
    (LlamaServerBackend, "chat", "counters from the stream"),
    (sampling, "check_sample", "check the answer"),
    (sampling, "dumps", "request/response JSON"),
    (sampling, "store_sent", "store the sample (insert + commit)"),
    (PollingLoadWatcher, "stop", "load watcher: stop"),
    (runner, "sync_point", "cell end: WAL sync point"),
    (runner.cellchecks, "snapshot", "cell: counters before/after"),
    (runner, "start_run", "run setup: runs row, campaign"),
    (runner, "register_models", "run setup: models (GGUF read)"),
    (runner, "MemoryCapture", "run setup: memory capture"),
    (runner, "_judge", "after the run: logs, gates, rules"),
    (runner, "finish_run", "after the run: status"),
)


class PhaseClock:
    """Exclusive wall time per phase (a phase's time inside another phase counts only there)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()

    def wrap(self, fn, phase: str):
        def timed(*a, **kw):
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time of inner phases, subtracted from this one
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                elapsed = time.perf_counter() - t0
                inner = stack.pop()
                if stack:
                    stack[-1] += elapsed
                self.seconds[phase] = self.seconds.get(phase, 0.0) + elapsed - inner
                self.calls[phase] = self.calls.get(phase, 0) + 1
        return timed

    @contextmanager
    def installed(self):
        with ExitStack() as undo:
            for owner, name, phase in PHASES:
                own = name in owner.__dict__  # a method may be inherited: put back exactly what was there
                original = getattr(owner, name)
                setattr(owner, name, self.wrap(original, phase))
                undo.callback(setattr, owner, name, original) if own else undo.callback(delattr, owner, name)
            yield self


def phase_table(clock: PhaseClock, requests: int, interval_s: float, echo_s: float) -> str:
    """Per-request milliseconds of each phase, and the share of the request interval."""
    lines = [f"{'phase':<44} {'calls':>5} {'ms/request':>10} {'share':>6}"]
    total = dict(clock.seconds)
    total["progress line (echo)"] = echo_s
    attributed = 0.0
    for phase, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        attributed += seconds
        lines.append(f"{phase:<44} {clock.calls.get(phase, requests):>5} {seconds * 1000 / requests:>10.3f} "
                     f"{seconds / interval_s:>6.1%}")
    rest = interval_s - attributed  # noqa: the loop itself, thread switches, the scheduler
    lines.append(f"{'unattributed (loop, scheduler)':<44} {'':>5} {rest * 1000 / requests:>10.3f} "
                 f"{rest / interval_s:>6.1%}")
    return "\n".join(lines)


__all__ = ["PHASES", "PhaseClock", "phase_table", "judge", "run_record"]
