"""What a log-line parser module declares: its facts' type, and ``PARSER``, its parsers with their triggers.

A parser module makes ``PARSER = LineParsers("name")`` and adds each parser with ``@PARSER.on(trigger,
...)``; ``parsers/__init__.py`` finds every module's ``PARSER`` (``cardproof.registry.declared``) and
runs them in ``LineParsers.order``, then module name, each module's in the order it added them.
"""

from __future__ import annotations

from typing import Callable, NamedTuple


class Fact(NamedTuple):
    """A typed value from one line. ``device`` is set for per-device sizes."""

    name: str
    value_num: float | None = None
    value_text: str | None = None
    unit: str | None = None
    device: str | None = None


Parser = Callable[[str], list]



class LineParsers:
    """A module's parsers, each with the trigger substrings of the lines it reads, in the order added."""

    def __init__(self, name: str, order: int = 0, markers: tuple[str, ...] = ()):
        self.name = name
        self.order = order
        self.parsers: list[tuple[tuple[str, ...], Parser]] = []
        #: substrings of lines that are no facts but are read by other code (access lines, timing blocks):
        #: they join the trigger scan, so one search per line finds every line of interest
        self.markers = markers

    def on(self, *triggers: str) -> Callable[[Parser], Parser]:
        """Decorator: the function parses lines containing any of ``triggers``."""

        def add(fn: Parser) -> Parser:
            self.parsers.append((triggers, fn))
            return fn

        return add


def mib(value: str, unit: str = "MiB") -> float:
    """A size in MiB from a number and its unit (B, KiB, MiB, GiB; kB/MB/GB read as binary)."""
    factor = {"b": 1 / 2**20, "kib": 1 / 1024, "kb": 1 / 1024, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0}
    return float(value) * factor.get(unit.lower(), 1.0)
