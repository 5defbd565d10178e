"""Numbers for the trend pages in the page's language, as ``Lang.num`` writes them, without Babel per call.

A trend page prints a few thousand figures and its charts' tooltips as many
again; Babel parses the pattern and looks the locale's symbols up on every
call (most of a page's time). Here the symbols are read once per language
and the rounding is the same as Babel's (the value's decimal text, half to
even), so a figure reads the same on a trend page as on a run article.
"""

from __future__ import annotations

import decimal
import functools
import math

from ..i18n import Lang
from ..mdsafe import MD, esc

_CONTEXT = decimal.Context(rounding=decimal.ROUND_HALF_EVEN, prec=60)


@functools.lru_cache(maxsize=None)
def _symbols(code: str) -> tuple[str, str]:
    """(group, decimal) separators of a language, taken from ``Lang.num`` itself."""
    sample = Lang(code).num(1234.5, 1)  # "1,234.5" / "1.234,5"
    return sample[1], sample[5]


def formatter(L: Lang):
    """``num(value, digits=1)`` for ``L``: the same text as ``L.num``, '—' where there is no finite figure.

    The text is trusted Markdown (``MD``: digits, separators, a sign or a dash), so a page template
    prints it without escaping and masking it again.
    """
    group, point = _symbols(L.code)
    table = str.maketrans({",": group, ".": point})

    def num(value, digits: int = 1) -> str:
        if not isinstance(value, (int, float, decimal.Decimal)) or isinstance(value, bool):
            return esc(L.num(value, digits))  # anything unusual: the language's own rule, escaped
        if isinstance(value, float) and not math.isfinite(value):
            return MD("—")
        text = repr(float(value)) if not isinstance(value, decimal.Decimal) else "e"
        whole, _, frac = text.partition(".")
        if "e" in text or "n" in text or (len(frac) == digits + 1 and frac.endswith("5")):
            # a tie at the rounding digit (or an exponent): Babel rounds the decimal text half to even,
            # binary formatting would round the float's exact value
            d = decimal.Decimal(str(value)).quantize(decimal.Decimal(1).scaleb(-digits), context=_CONTEXT)
            return MD(f"{d:,f}".translate(table))
        # elsewhere the float's exact value and its shortest decimal text round alike
        return MD(f"{value:,.{digits}f}".translate(table))

    return num


def dates(L: Lang):
    """``when(iso)``: ``L.datetime`` as escaped Markdown, once per distinct date (a run's date is
    printed in every cell's table of its page)."""
    seen: dict = {}

    def when(iso) -> MD:
        key = iso if isinstance(iso, (str, type(None))) else repr(iso)
        if key not in seen:
            seen[key] = esc(L.datetime(iso))
        return seen[key]

    return when
