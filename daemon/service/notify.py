"""sd_notify, spoken directly over the ``NOTIFY_SOCKET`` unix datagram socket.

No libsystemd binding: the protocol is one datagram of ``KEY=value`` lines.
Without ``NOTIFY_SOCKET`` (foreground use, tests without systemd) every call
is a no-op that returns False, so the daemon code never branches on systemd.
"""

from __future__ import annotations

import os
import socket
import time

_STATUS_MAX = 200  # systemctl status shows one line; keep it readable


class Notifier:
    """Sends READY/STATUS/WATCHDOG/STOPPING to systemd when it is listening."""

    def __init__(self, env: dict | None = None):
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET") or None
        if addr and addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace socket
        self.address = addr
        self.watchdog_s = _watchdog_interval(env)
        self.sent: list[str] = []  # kept for the status view and tests
        self.dropped = 0  # messages not sent because the receiver's queue was full
        self._sock: socket.socket | None = None
        self._last_watchdog = 0.0
        self._last_status = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *lines: str) -> bool:
        """Send one datagram; False when there is no socket or it is gone."""
        if not self.address:
            return False
        msg = "\n".join(lines)
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            # never block: a full receive queue must not stall the main loop (and its SIGTERM handling)
            self._sock.sendto(msg.encode("utf-8"), socket.MSG_DONTWAIT, self.address)
        except BlockingIOError:
            self.dropped += 1
            return False
        except OSError:
            # systemd gone or socket removed: the daemon keeps working without it
            return False
        self.sent.append(msg)
        del self.sent[:-50]
        return True

    def ready(self, status: str | None = None) -> bool:
        lines = ["READY=1", f"MAINPID={os.getpid()}"]
        if status:
            lines.append("STATUS=" + _one_line(status))
        return self.send(*lines)

    def status(self, text: str) -> bool:
        """STATUS= only when the text changed: systemd logs nothing, but why send it twice."""
        text = _one_line(text)
        if text == self._last_status:
            return False
        self._last_status = text
        return self.send("STATUS=" + text)

    def watchdog(self, now: float | None = None) -> bool:
        """WATCHDOG=1 at most every half watchdog interval (or every call without one)."""
        now = time.monotonic() if now is None else now
        if self.watchdog_s and now - self._last_watchdog < self.watchdog_s / 2:
            return False
        self._last_watchdog = now
        return self.send("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        lines = ["STOPPING=1"]
        if status:
            lines.append("STATUS=" + _one_line(status))
        return self.send(*lines)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _STATUS_MAX else text[: _STATUS_MAX - 1] + "…"


def _watchdog_interval(env) -> float | None:
    """Seconds from WATCHDOG_USEC, when the watchdog is meant for this process."""
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec:
        return None
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 1e6 if value > 0 else None
