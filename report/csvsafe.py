"""The one way a CSV the site offers is written: no cell a spreadsheet would run as a formula.

Names in a CSV come from campaigns, servers and logs (a model called
``=HYPERLINK(...)``, a build ``-2+3``): a spreadsheet opening the file runs a
cell that starts with ``=``, ``+``, ``-``, ``@`` (or a tab, CR or LF before
one) as a formula, DDE payloads such as ``=cmd|' /C calc'!A0`` included. So,
following OWASP's CSV injection guidance, a text cell that starts with one of
them (after blanks or quotes, which some importers trim; the full-width forms
too, which some spreadsheets read as the ASCII ones) gets a leading ``'``,
which a spreadsheet shows as text. A spreadsheet may also split on another
separator than the comma (``;`` in German locales, tab, ``|``): a formula
character right after one of those inside a text is neutralised the same way,
so no split can start a cell with it. Numbers are written as numbers: a
negative figure stays a figure.

In short, ``csvsafe.py``: the one CSV writer for every CSV the site offers (per-run
samples, trend pages): no text cell starts a formula (``=``, ``+``, ``-``, ``@``, tab, CR, LF,
full-width forms, after blanks or quotes, or after a ``;``, ``,``, tab or ``|`` a spreadsheet may
split on): a ``'`` goes before it (OWASP CSV injection)
"""

from __future__ import annotations

import csv
import re

#: what a spreadsheet reads as the start of a formula (the full-width forms: U+FF1D, U+FF0B, U+FF0D, U+FF20)
FORMULA_START = frozenset("=+-@\t\r\n\x00\uff1d\uff0b\uff0d\uff20")
_FORMULA_CLASS = "=+\\-@\uff1d\uff0b\uff0d\uff20"
# a separator some spreadsheet splits on, blanks or quotes it may trim, then a formula character
_SPLIT_FORMULA = re.compile(f"([,;\\t|\\r\\n\\x00][\\s\"']*)(?=[{_FORMULA_CLASS}])")
_TRIMMED = " \u00a0\"'"


def cell(value):
    """``value`` as one CSV cell: None empty, booleans ``true``/``false``, lists joined with ``;``, numbers as
    they are, any text with no formula a spreadsheet could run (see the module)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (list, tuple)):
        value = ";".join(map(str, value))
    elif isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    # a lone CR is a line end to a reader, yet csv.writer quotes only the writer's own line end: as LF it is
    # quoted and stays inside its cell
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")
    text = _SPLIT_FORMULA.sub(r"\1'", text)
    if text.lstrip(_TRIMMED)[:1] in FORMULA_START:
        text = "'" + text
    return text


class _Writer:
    """``csv.writer`` whose every cell has gone through :func:`cell`."""

    def __init__(self, f, **kw):
        self._w = csv.writer(f, **kw)

    def writerow(self, row):
        return self._w.writerow([cell(v) for v in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def writer(f, **kw) -> _Writer:
    """A CSV writer for a file the site offers (``kw`` as for ``csv.writer``)."""
    return _Writer(f, **kw)
