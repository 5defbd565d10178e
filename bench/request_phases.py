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

from cardproof.daemon.run import judge, runner, record as run_record, sampling
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
    """Exclusive wall and thread CPU time per phase (a phase's time inside another phase counts only there)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()

    def wrap(self, fn, phase: str):
        def timed(*a, **kw):
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append([0.0, 0.0])  # wall and CPU of inner phases, subtracted from this one
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
                inner = stack.pop()
                if stack:
                    stack[-1][0] += wall
                    stack[-1][1] += cpu
                self.seconds[phase] = self.seconds.get(phase, 0.0) + wall - inner[0]
                self.cpu_seconds[phase] = self.cpu_seconds.get(phase, 0.0) + cpu - inner[1]
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


def phase_table(clock: PhaseClock, requests: int, interval_s: float, echo_s: float, cpu_s: float) -> str:
    """Per-request wall and CPU milliseconds of each phase, and the share of the block's wall time."""
    lines = [f"{'phase':<44} {'calls':>5} {'wall ms/req':>11} {'CPU ms/req':>10} {'share':>6}"]
    total = dict(clock.seconds)
    total["progress line (echo)"] = echo_s
    attributed = attributed_cpu = 0.0
    for phase, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        cpu = clock.cpu_seconds.get(phase, 0.0)
        attributed += seconds
        attributed_cpu += cpu
        lines.append(f"{phase:<44} {clock.calls.get(phase, requests):>5} {seconds * 1000 / requests:>11.3f} "
                     f"{cpu * 1000 / requests:>10.3f} {seconds / interval_s:>6.1%}")
    rest = interval_s - attributed  # the loop itself, thread switches, the scheduler
    lines.append(f"{'unattributed (loop, scheduler)':<44} {'':>5} {rest * 1000 / requests:>11.3f} "
                 f"{(cpu_s - attributed_cpu) * 1000 / requests:>10.3f} {rest / interval_s:>6.1%}")
    return "\n".join(lines)


__all__ = ["PHASES", "PhaseClock", "phase_table", "judge", "run_record"]
