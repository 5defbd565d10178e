"""Value checks shared by the campaign and the daemon config readers.

Each check returns the value (converted where needed) or raises ``Invalid``
with the "expected ..., got ..." half of a message; the reader adds the file
and the dotted key, so every refusal is one line that says where and what.

A value that passes must be safe everywhere downstream: numbers are finite
and inside a stated range (a huge int must not reach SQLite's 64-bit columns,
a prompt size must not exhaust memory), strings carry no control characters
(they end up in argv, HTTP requests, log lines, Markdown and SQLite), and a
URL is one that both the standard parser and httpx accept.

The checks are used as pydantic ``Annotated`` validators (the aliases at the
end: ``Bool``, ``Int(lo, hi)``, ``Number(lo, hi)``, ``Name``, ...): the
campaign and daemon-config models in ``campaign_schema`` and
``service/config`` are declared with them, and ``daemon/campaign/schema.py`` turns a
refusal into "file: key 'a.b[2].c': expected ...". Each check does its own
type test, so pydantic never coerces a value (``"5"`` is not 5, ``true`` is
not 1).
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Annotated, Any, Callable
from urllib.parse import urlsplit

from pydantic import BeforeValidator

# TOML and JSON can nest without limit; Python's parsers recurse per level
NESTED_TOO_DEEP = "nested too deeply to be a configuration"

PATH_CHARS = 4096  # Linux PATH_MAX
URL_CHARS = 2048
# Categories refused in names: controls (C0, DEL, C1), invisible format characters such as
# bidirectional overrides and zero-width joiners, and line/paragraph separators. A name
# is shown in tables and terminals, and two names must not look alike while differing.
_NAME_REFUSED = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}
_UNIT = re.compile(r"[A-Za-z0-9:_.@\\*?\[\]-]+")  # systemd unit names, with journalctl's glob characters
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Invalid(ValueError):
    """A value outside what a key accepts; str() is the "expected ..." part of a message.

    ``at`` names the part of the value at fault, below the key being checked
    (``(1, "name")`` for a list of tables): a check of a whole list or table
    can still point at the one item that is wrong.
    """

    def __init__(self, message: str, *, at: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.at = at


def shown(text: str, limit: int = 200) -> str:
    """``text`` safe for a one-line message: non-printable characters escaped, long text cut."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return out if len(out) <= limit else out[:limit] + "..."


def quoted(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` (repr escapes what is not printable)."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit] + "..."


def describe(value: Any, limit: int = 80) -> str:
    """``type repr`` for "got ...": the repr escaped by Python and cut to ``limit``."""
    return f"{type(value).__name__} {quoted(value, limit)}"


def _bad_char(value: str, refused: set[str], allowed: str) -> tuple[int, str] | None:
    for i, ch in enumerate(value):
        if ch in allowed:
            continue
        if unicodedata.category(ch) in refused:
            return i, ch
    return None


def text(value: Any, *, what: str = "a non-empty string", max_chars: int = 256, allow: str = "",
         refused: set[str] | None = None) -> str:
    """A non-empty string without control characters (``allow`` lists the ones a key may hold).

    ``refused`` defaults to controls only (``Cc``); names pass the wider set
    used by :func:`name`.
    """
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"expected {what}, got {describe(value)}")
    if len(value) > max_chars:
        raise Invalid(f"expected {what} of at most {max_chars:,} characters, got {len(value):,}")
    bad = _bad_char(value, refused if refused is not None else {"Cc"}, allow)
    if bad is not None:
        i, ch = bad
        kind = "control character" if unicodedata.category(ch) == "Cc" else "invisible or format character"
        raise Invalid(f"expected {what}, got one with {kind} U+{ord(ch):04X} at position {i + 1}")
    return value


def name(value: Any, *, what: str = "a name", max_chars: int = 256) -> str:
    """A name shown to people and sent to servers: printable, no outer whitespace, bounded."""
    out = text(value, what=what, max_chars=max_chars, refused=_NAME_REFUSED)
    if out != out.strip():
        raise Invalid(f"expected {what} without leading or trailing whitespace, got {describe(value)}")
    return out


def path(value: Any, *, what: str = "a file path") -> str:
    """A file system path: no NUL or other control character (open() and argv would refuse or mangle it)."""
    return text(value, what=what, max_chars=PATH_CHARS)


def unit_name(value: Any) -> str:
    """A systemd unit name or journalctl glob (``llama-server.service``, ``llama-*``)."""
    out = text(value, what="a systemd unit name", max_chars=256)
    if not _UNIT.fullmatch(out) or out.startswith("-"):
        raise Invalid(f"expected a systemd unit name (letters, digits and :_.@\\-, or a glob), got {describe(value)}")
    return out


def env_name(value: Any) -> str:
    """An environment variable name."""
    out = text(value, what="an environment variable name", max_chars=256)
    if not _ENV.fullmatch(out):
        raise Invalid(f"expected an environment variable name (letters, digits, _), got {describe(value)}")
    return out


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {describe(value)}")
    return value


def integer(value: Any, lo: int, hi: int) -> int:
    """An int in ``lo..hi`` (a bool or a float is not an int)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Invalid(f"expected an integer from {lo:,} to {hi:,}, got {describe(value)}")
    return value


def number(value: Any, lo: float, hi: float, *, above: bool = False) -> float:
    """A finite int or float with ``lo <= value <= hi`` (``lo < value`` with ``above``).

    The comparison happens before ``float()``: an integer too large for a
    float would otherwise raise OverflowError instead of being refused.
    """
    ok = (not isinstance(value, bool) and isinstance(value, (int, float))
          and not (isinstance(value, float) and not math.isfinite(value))
          and (lo < value if above else lo <= value) and value <= hi)
    if not ok:
        low = f"above {_num(lo)}" if above else f"from {_num(lo)}"
        raise Invalid(f"expected a finite number {low} up to {_num(hi)}, got {describe(value)}")
    return float(value)


def _num(x: float) -> str:
    """1e9 as 1,000,000,000 and 86400.0 as 86,400: a limit should read as a number."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def http_url(value: Any) -> str:
    """An http(s) base URL with a host, as both urllib and httpx parse it; returned without a trailing /.

    User info (``user:pass@``) is accepted; a query or fragment is not,
    because request paths are appended to this URL.
    """
    what = "an http:// or https:// URL"
    out = text(value, what=what, max_chars=URL_CHARS)
    if any(ch.isspace() for ch in out):
        raise Invalid(f"expected {what} without spaces, got {describe(value)}")
    try:
        parts = urlsplit(out)
        port = parts.port  # raises for a port that is not a number or out of range
    except ValueError as exc:
        raise Invalid(f"expected {what}, got {describe(value)} ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise Invalid(f"expected {what}, got {describe(value)}")
    if not parts.hostname:
        raise Invalid(f"expected {what} with a host, got {describe(value)}")
    if port == 0:
        raise Invalid(f"expected {what} with a port from 1 to 65535, got {describe(value)}")
    if parts.query or parts.fragment or out.endswith(("?", "#")):
        raise Invalid(f"expected {what} without ?query or #fragment (paths are appended to it), "
                      f"got {describe(value)}")
    import httpx  # the client that will use it must agree

    try:
        httpx.URL(out)
    except (httpx.InvalidURL, ValueError) as exc:
        raise Invalid(f"expected {what}, got {describe(value)} ({exc})") from None
    return out.rstrip("/")


# -- the checks as pydantic field types ------------------------------------------------------------

def checked(check: Callable[[Any], Any], kind: Any = Any) -> Any:
    """``kind`` whose every value passes ``check`` before pydantic sees it (so nothing is coerced)."""
    return Annotated[kind, BeforeValidator(check)]


def Int(lo: int, hi: int) -> Any:  # noqa: N802 -- read as a type in model declarations
    return checked(lambda v: integer(v, lo, hi), int)


def Number(lo: float, hi: float, *, above: bool = False) -> Any:  # noqa: N802
    return checked(lambda v: number(v, lo, hi, above=above), float)


def Name(max_chars: int = 256) -> Any:  # noqa: N802
    return checked(lambda v: name(v, max_chars=max_chars), str)


def table(what: str = "", max_items: int | None = None) -> Callable[[Any], dict]:
    """A check for a TOML table of at most ``max_items`` entries (``what`` names them in the message)."""
    def check(value: Any) -> dict:
        if not isinstance(value, dict):
            raise Invalid(f"expected a table, got {describe(value)}")
        if max_items is not None and len(value) > max_items:
            raise Invalid(f"expected at most {max_items:,} {what}, got {len(value):,}")
        return value
    return check


def bounded_list(value: Any, item: Callable[[Any], Any], *, expected: str, max_items: int, noun: str,
                 non_empty: bool = True, tuples: bool = False, distinct: bool = False) -> list:
    """The items of a TOML list, each through ``item``, the one at fault named by its index.

    ``expected`` says what the whole should be (``a non-empty list of server arguments``); more than
    ``max_items`` is refused as ``expected at most N <noun>``. ``tuples`` also takes a tuple (settings built
    in code), ``distinct`` refuses an item given twice.
    """
    if not isinstance(value, (list, tuple) if tuples else list) or (non_empty and not value):
        raise Invalid(f"expected {expected}, got {describe(value)}")
    if len(value) > max_items:
        raise Invalid(f"expected at most {max_items:,} {noun}, got {len(value):,}")
    out: list = []
    for i, raw in enumerate(value):
        try:
            checked_item = item(raw)
        except Invalid as exc:
            raise Invalid(str(exc), at=(i,)) from None
        if distinct and checked_item in out:
            raise Invalid(f"{raw} is listed twice", at=(i,))
        out.append(checked_item)
    return out


def distinct(what: str, known: Callable[[], Any] | None = None) -> Callable[[Any], tuple[str, ...]]:
    """A check for a non-empty list of distinct ``what`` names, each one of ``known()`` where given.

    The item at fault is named (``probes.run[1]``); ``known`` is called at
    check time, so a registry filled later (or patched in a test) is read.
    """
    def check(items: Any) -> tuple[str, ...]:
        if not isinstance(items, (list, tuple)) or not items:
            raise Invalid(f"expected a non-empty list of {what} names, got {describe(items)}")
        names = set(known()) if known is not None else None
        seen: set[str] = set()
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise Invalid(f"expected a {what} name, got {describe(item)}", at=(i,))
            if names is not None and item not in names:
                raise Invalid(f"unknown {what} {quoted(item)} (known: {', '.join(sorted(names))})", at=(i,))
            if item in seen:
                raise Invalid(f"{what} {quoted(item)} is listed twice", at=(i,))
            seen.add(item)
        return tuple(items)
    return check


Bool = checked(boolean, bool)
FilePath = checked(path, str)
UnitName = checked(unit_name, str)
EnvName = checked(env_name, str)
HttpUrl = checked(http_url, str)
