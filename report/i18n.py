"""One source for both languages: a message catalogue and Babel formatting.

Templates call ``_("English text")``; German comes from CATALOGUE. Numbers
are formatted by Babel per locale (145.3 / 145,3), never by string hacks.
"""

from __future__ import annotations

from babel.dates import format_datetime
from babel.numbers import format_decimal, format_percent

LANGUAGES = ("en", "de")

def _load_catalogue() -> dict[str, str]:
    """Merge ``MESSAGES`` (English -> German) from every module in report/messages/."""
    import importlib
    import pkgutil

    from . import messages

    merged: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(messages.__path__), key=lambda i: i.name):
        merged.update(importlib.import_module(f"{messages.__name__}.{info.name}").MESSAGES)
    return merged


CATALOGUE: dict[str, str] = _load_catalogue()


def _finite(value) -> bool:
    """A number a formatter can print (bool is not one)."""
    import math

    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


class Lang:
    """Translation and locale formatting for one language."""

    def __init__(self, code: str):
        if code not in LANGUAGES:
            raise ValueError(f"unknown language {code!r}")
        self.code = code

    def gettext(self, msg: str) -> str:
        if self.code == "en":
            return msg
        return CATALOGUE.get(msg, msg)

    def num(self, value, digits: int = 1) -> str:
        if not _finite(value):  # None, text from a damaged row, inf: no figure to print
            return "—"
        fmt = "#,##0" + ("." + "0" * digits if digits else "")
        return format_decimal(value, format=fmt, locale=self.code)

    def pct(self, value, digits: int = 0) -> str:
        if not _finite(value):
            return "—"
        fmt = "#,##0" + ("." + "0" * digits if digits else "") + "\u00a0%"
        return format_percent(value, format=fmt, locale=self.code)

    def signed_pct(self, value, digits: int = 1) -> str:
        """``+8.8 %`` / ``−5.9 %`` with a real minus sign."""
        if not _finite(value):
            return "—"
        text = self.pct(abs(value), digits)
        return ("+" if value >= 0 else "\u2212") + text

    def datetime(self, iso) -> str:
        """A stored timestamp for the page; anything that is no date is shown as the text it is.

        Times with a zone are shown in UTC; a zone-less one (an access log's
        own clock) without a zone name, since it is nobody's UTC. Never
        raises: an impossible date in one log line must not stop a build.
        """
        if iso is None or iso == "":
            return "—"
        from datetime import datetime as _dt, timezone

        try:
            dt = _dt.fromisoformat(str(iso))
            if dt.tzinfo is None:
                return format_datetime(dt, format="yyyy-MM-dd HH:mm:ss", locale=self.code)
            dt = dt.astimezone(timezone.utc)
            return format_datetime(dt, format="yyyy-MM-dd HH:mm:ss 'UTC'", locale=self.code)
        except (ValueError, TypeError, OverflowError):
            from .build import code_span  # late: build imports this module

            return code_span(str(iso)[:80])

    def size(self, n_bytes) -> str:
        if not _finite(n_bytes):
            return "—"
        if n_bytes >= 2**30:
            return f"{self.num(n_bytes / 2**30, 1)} GiB"
        return f"{self.num(n_bytes / 2**20, 1)} MiB"
