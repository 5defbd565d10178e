"""The exclusive-access window: wait for quiet cards, or give up and say why.

Foreign activity comes from pluggable sources, each answering "what happened
since you were last asked": the server's own counters (tokens generated and
models loaded while we sent nothing), access-log requests per client address
(the ``requests_seen`` table the log collector fills), and later NVML's
foreign GPU processes. The wait never measures under contention: either the
activity stayed within the limits for ``quiet_s`` in a row, or after
``give_up_s`` it gives up with a reason a person can act on.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import httpx

from ..backends import BackendError
from ..backends.llamaserver import LlamaServerBackend


@dataclass
class Activity:
    """Foreign activity seen by one source since its previous observation."""

    tokens: int = 0
    requests: int = 0
    loads: int = 0
    busy: int = 0  # requests in progress at the moment of observation (a gauge, not a count)
    clients: dict[str, int] = field(default_factory=dict)  # foreign requests per address
    gpu_pids: dict[int, str] = field(default_factory=dict)  # foreign GPU processes
    errors: list[str] = field(default_factory=list)

    def add(self, other: "Activity") -> None:
        self.tokens += other.tokens
        self.requests += other.requests
        self.loads += other.loads
        self.busy += other.busy
        for k, v in other.clients.items():
            self.clients[k] = self.clients.get(k, 0) + v
        self.gpu_pids.update(other.gpu_pids)
        self.errors += other.errors


class ForeignSource(Protocol):
    name: str

    def observe(self) -> Activity:
        """Activity since the previous call; the first call sets the baseline."""
        ...


class ServerCountersSource:
    """llama-server's ``/metrics`` per loaded model, and loads nobody asked us for.

    Only models the router reports as loaded are asked: ``/metrics?model=X``
    on an unloaded model makes the router load it, which would be our own
    foreign load. A counter that went down means the child restarted; its
    new value is all new activity. The counters do not name clients.
    """

    name = "server counters"

    def __init__(self, url: str, *, timeout_s: float = 5.0):
        self.backend = LlamaServerBackend(url, timeout_s=timeout_s)
        self._tokens: dict[str, float] = {}
        self._status: dict[str, str] | None = None

    def observe(self) -> Activity:
        act = Activity()
        try:
            models = self.backend.models()
        except BackendError as exc:
            act.errors.append(f"{self.backend.url}/models: {exc}")
            return act
        status = {}
        for m in models:
            st = m.get("status")
            status[m.get("id")] = st.get("value") if isinstance(st, dict) else (st or "loaded")
        if self._status is not None:
            act.loads = sum(1 for name, st in status.items()
                            if st in ("loading", "loaded") and self._status.get(name) not in ("loading", "loaded"))
        self._status = status
        for name, st in status.items():
            if st != "loaded":
                self._tokens.pop(name, None)  # a later load starts from zero
                continue
            try:
                metrics = self.backend.metrics(name)
            except BackendError as exc:
                act.errors.append(f"metrics of {name}: {exc}")
                continue
            now = metrics.get("tokens_predicted_total")
            if now is None:
                act.errors.append(f"metrics of {name}: no tokens_predicted_total")
                continue
            before = self._tokens.get(name)
            if before is not None:
                act.tokens += int(now - before) if now >= before else int(now)
            self._tokens[name] = now
            # a request in progress breaks the quiet now, before its tokens reach the counter
            act.busy += int(metrics.get("requests_processing") or 0)
        return act

    def close(self) -> None:
        self.backend.close()


class RequestsSeenSource:
    """Foreign requests per client address from the ``requests_seen`` table."""

    name = "access log"

    def __init__(self, db_path, own_clients=("127.0.0.1", "::1")):
        from ..store import open_store

        self.store = open_store(db_path)
        self.own = set(own_clients)
        row = self.store.db.execute("select max(id) from requests_seen").fetchone()
        self._last_id = row[0] or 0

    def observe(self) -> Activity:
        act = Activity()
        rows = self.store.db.execute(
            "select id, client from requests_seen where id > ? order by id", [self._last_id]
        ).fetchall()
        for rid, client in rows:
            self._last_id = rid
            if client in self.own:
                continue
            act.requests += 1
            act.clients[client or "?"] = act.clients.get(client or "?", 0) + 1
        return act

    def close(self) -> None:
        self.store.close()


@dataclass
class QuietResult:
    outcome: str  # quiet | gave_up | stopped
    waited_s: float
    total: Activity
    per_minute: list[dict]
    blocked_seen: list[str]
    reason: str


def wait_for_quiet(
    sources: list,
    *,
    quiet_s: float,
    give_up_s: float,
    poll_s: float,
    max_tokens: int = 0,
    max_requests: int = 0,
    blocked: tuple[str, ...] = (),
    stop: threading.Event | None = None,
    on_poll: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] | None = None,
) -> QuietResult:
    """Poll ``sources`` until activity stays within the limits for ``quiet_s``, at most ``give_up_s``.

    Loads by others and foreign GPU processes always break the quiet: either
    changes what the card is doing. ``stop`` ends the wait at once.
    """
    stop = stop or threading.Event()
    sleep = sleep or stop.wait
    for s in sources:
        s.observe()  # baseline: what happened before the wait is not ours to judge
    t0 = clock()
    quiet_since = t0
    window = Activity()  # activity since quiet_since
    total = Activity()
    minutes: list[dict] = []
    reason = ""
    while True:
        now = clock()
        if stop.is_set():
            outcome, reason = "stopped", "the daemon was asked to stop while waiting for quiet"
            break
        if now - quiet_since >= quiet_s:
            outcome = "quiet"
            reason = f"quiet for {quiet_s:g} s after waiting {_dur(now - t0)}"
            break
        if now - t0 >= give_up_s:
            outcome = "gave_up"
            reason = _give_up_reason(quiet_s, give_up_s, minutes, total, blocked, now - t0)
            break
        sleep(min(poll_s, max(0.0, give_up_s - (now - t0))))
        act = Activity()
        for s in sources:
            act.add(s.observe())
        now = clock()
        total.add(act)
        window.add(act)
        _per_minute(minutes, now - t0, act)
        if (window.tokens > max_tokens or window.requests > max_requests or act.loads or act.busy or act.gpu_pids
                or any(c in blocked for c in act.clients)):
            quiet_since, window = now, Activity()
        if on_poll:
            on_poll(f"waiting for quiet: {_dur(now - quiet_since)} of {quiet_s:g} s quiet, "
                    f"waited {_dur(now - t0)} of {_dur(give_up_s)}")
    blocked_seen = sorted(c for c in total.clients if c in blocked)
    return QuietResult(outcome, clock() - t0, total, minutes, blocked_seen, reason)


def _per_minute(minutes: list[dict], elapsed_s: float, act: Activity) -> None:
    """Activity per minute of the wait; a partial minute is kept with its length."""
    # a poll reports what happened up to its moment: one at exactly 60 s belongs to minute 0
    idx = max(0, int((elapsed_s - 1e-9) // 60))
    for m in minutes:
        m["seconds"] = 60.0  # every earlier minute is complete
    while len(minutes) <= idx:
        minutes.append({"minute": len(minutes), "tokens": 0, "requests": 0, "loads": 0, "clients": {},
                        "seconds": 0.0})
    m = minutes[idx]
    m["tokens"] += act.tokens
    m["requests"] += act.requests
    m["loads"] += act.loads
    m["seconds"] = min(60.0, elapsed_s - 60 * idx)
    for k, v in act.clients.items():
        m["clients"][k] = m["clients"].get(k, 0) + v


def _rate_range(minutes: list[dict], key: str) -> tuple[int, int]:
    # a partial minute is scaled to a rate, so a short wait still reads "per minute"
    rates = [round(m[key] * 60.0 / m["seconds"]) for m in minutes if m["seconds"] > 0]
    return (min(rates), max(rates)) if rates else (0, 0)


def _give_up_reason(quiet_s, give_up_s, minutes, total: Activity, blocked, waited_s) -> str:
    parts = []
    if total.requests:
        lo, hi = _rate_range(minutes, "requests")
        parts.append(f"{_span(lo, hi)} foreign requests per minute from {compact_addresses(total.clients)}")
    if total.tokens:
        lo, hi = _rate_range(minutes, "tokens")
        parts.append(f"{_span(lo, hi)} foreign tokens per minute (server counters; they name no client)")
    if total.busy and not total.tokens:
        parts.append(f"a foreign request in progress at {total.busy} polls")
    if total.loads:
        parts.append(f"{total.loads} model loads nobody asked cardproof for")
    if total.gpu_pids:
        parts.append("foreign GPU processes " + ", ".join(f"{p} ({n})" for p, n in sorted(total.gpu_pids.items())))
    seen = sorted(c for c in total.clients if c in blocked)
    if seen:
        parts.append(f"requests from blocked address {', '.join(seen)}: the block is not effective")
    if total.errors and not parts:
        parts.append(f"sources failing: {total.errors[-1]}")
    return f"no quiet gap of {quiet_s:g} s in {_dur(give_up_s)}: " + ("; ".join(parts) or "no activity recorded")


def _span(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _dur(s: float) -> str:
    if s >= 3600 and s % 3600 == 0:
        return f"{s / 3600:g} h"
    if s >= 120:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s".replace(".0 s", " s")


def compact_addresses(clients: dict[str, int] | list[str]) -> str:
    """``192.168.1.5, .7``: later IPv4 addresses in the same /24 are shortened."""
    out, prefix = [], None
    for a in sorted(clients, key=_addr_key):
        parts = a.split(".")
        try:
            v4 = isinstance(ipaddress.ip_address(a), ipaddress.IPv4Address)
        except ValueError:
            v4 = False
        if v4 and prefix == parts[:3]:
            out.append("." + parts[3])
        else:
            out.append(a)
            prefix = parts[:3] if v4 else None
    return ", ".join(out)


def _addr_key(a: str):
    try:
        ip = ipaddress.ip_address(a)
        return (ip.version, int(ip))
    except ValueError:
        return (9, 0)


def sources_for(url: str | None, db_path, own_clients) -> list:
    """The sources available for a campaign's server: counters, and the access log table."""
    out = []
    if url:
        out.append(ServerCountersSource(url))
    out.append(RequestsSeenSource(db_path, own_clients))
    return out


def close_sources(sources) -> None:
    for s in sources:
        close = getattr(s, "close", None)
        if close:
            try:
                close()
            except (httpx.HTTPError, OSError):
                pass
