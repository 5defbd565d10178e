"""One source for both languages: a gettext catalogue (Babel) and Babel formatting.

Adding a string (read this before adding one):
  1. Write it in English where it is used: ``_("Text")`` in a template or
     ``L.gettext("Text")`` in Python; for a count ``L.ngettext("%(num)s sample",
     "%(num)s samples", n)`` (Python) or ``ngettext(...)`` (templates), never
     "n" glued before a fixed plural. A constant translated where it is shown
     (a rule's message id, a gate's description, a stored ``Said``) is marked
     ``N_("Text")`` (``NP_(singular, plural)`` for a count) from cardproof.marks;
     a word that arrives as data goes into report/data_words.py.
  2. Run ``python scripts/catalogue.py``: it extracts every marked string
     (babel.cfg covers report/, daemon/ and cardproof/) into
     ``report/locale/cardproof.pot`` and brings the German .po up to it.
  3. Give it German in ``report/locale/de/LC_MESSAGES/cardproof.po`` (a
     ``msgstr``; ``msgstr[0]``/``msgstr[1]`` for a count), in the words of
     docs/GLOSSARY.md. tests/test_i18n_catalogue.py fails for a string without
     German, tests/test_i18n_extraction.py for a .pot that is not regenerated.
Every string of the report lives in the ``.po``; the probe defects register's
texts (daemon/probes/defects.toml, English msgids with counts filled in from the
probes) are filled in German here.

The ``.po`` is compiled in memory when this module is imported, so a plain
``pip install -e .`` works and no stale ``.mo`` can exist. Numbers are
formatted by Babel per locale (145.3 / 145,3), never by string hacks.

In short, ``i18n.py``, ``locale/``: German from the gettext catalogue
``report/locale/de/LC_MESSAGES/cardproof.po`` (Babel, compiled in memory at import; ``ngettext`` for
counts), Babel number/date formatting; the terms follow ``docs/GLOSSARY.md``. Every shown string is
an English msgid: ``_()``/``L.gettext()`` where translated, ``N_()``/``NP_()``
(``cardproof/marks.py``) on constants translated where shown, words arriving as data in
``data_words.py``. ``babel.cfg`` covers report/, daemon/ and cardproof/ (through
``cardproof.marks.extract_python``, Babel's extractor plus marked calls inside f-strings); ``python
scripts/catalogue.py`` regenerates ``locale/cardproof.pot`` and updates the German ``.po``, and
``tests/test_i18n_extraction.py`` fails when the committed ``.pot`` differs from a fresh extraction
"""

from __future__ import annotations

import functools
import io
from decimal import ROUND_HALF_EVEN, Decimal
from importlib import resources

from babel.dates import format_datetime
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel import Locale
from babel.numbers import format_percent, parse_pattern
from babel.support import NullTranslations, Translations

from cardproof.marks import N_

LANGUAGES = ("en", "de")
DOMAIN = "cardproof"


def po_path(lang: str = "de"):
    """The catalogue file of ``lang`` inside the installed package."""
    return resources.files("cardproof.report") / "locale" / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def read_catalogue(lang: str = "de"):
    """The ``.po`` of ``lang`` as a babel Catalog."""
    with po_path(lang).open("rb") as f:
        return read_po(f, locale=lang, domain=DOMAIN)


def _register_messages(catalog) -> dict[str, str]:
    """The probe defects register's texts as the report shows them (their counts filled in) -> German.

    The register's English texts are msgids of ``catalog``; the filled text is what a page asks for.
    """
    from cardproof.daemon.campaign.evidence import in_language, load_defects

    def say(msgid: str) -> str:
        msg = catalog.get(msgid)
        return msg.string if msg is not None and msg.string and not msg.fuzzy else msgid

    merged: dict[str, str] = {}
    for entries in load_defects().values():
        for d in entries:
            for key in ("defect", "effect"):
                merged[d[key]] = in_language(d, key, say)
    return merged


def _load() -> tuple[Translations, dict[str, str]]:
    catalog = read_catalogue("de")
    extra = _register_messages(catalog)
    for en, de in extra.items():
        if en not in catalog:
            catalog.add(en, de)
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    buf.seek(0)
    translations = Translations(buf, domain=DOMAIN)
    # msgid -> German (a plural's singular -> its singular form): what _() may trust as ours
    flat: dict[str, str] = {}
    for msg in catalog:
        if not msg.id or msg.fuzzy:
            continue
        if msg.pluralizable:
            flat[msg.id[0]] = msg.string[0]
            flat[msg.id[1]] = msg.string[-1]
        else:
            flat[msg.id] = msg.string
    return translations, flat


TRANSLATIONS, CATALOGUE = _load()
_ENGLISH = NullTranslations()


def _finite(value) -> bool:
    """A number a formatter can print (bool is not one)."""
    import math

    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


#: quotation marks as a message: each language's catalogue gives its own (German: low-high)
QUOTE = N_("“{text}”")


#: the site's languages whose separators are Python's own (1,234.5), and those that swap them (1.234,5)
_PYTHON_SEPARATORS = frozenset({"en"})
_SWAPPED_SEPARATORS = frozenset({"de"})
_SWAP = str.maketrans({",": ".", ".": ","})
_QUANTUM = {d: Decimal(1).scaleb(-d) for d in range(7)}


@functools.lru_cache(maxsize=16)
def _decimal_pattern(digits: int):
    return parse_pattern("#,##0" + ("." + "0" * digits if digits else ""))


@functools.lru_cache(maxsize=8)
def _locale(code: str) -> Locale:
    return Locale.parse(code)


class Lang:
    """Translation and locale formatting for one language."""

    def __init__(self, code: str):
        if code not in LANGUAGES:
            raise ValueError(f"unknown language {code!r}")
        self.code = code

    @property
    def translations(self):
        return _ENGLISH if self.code == "en" else TRANSLATIONS

    def gettext(self, msg: str) -> str:
        if self.code == "en":
            return msg
        return self.translations.gettext(msg)

    def ngettext(self, singular: str, plural: str, n, **params) -> str:
        """The form for ``n`` in this language, with ``%(num)s`` as ``n`` in its locale format.

        English and German: one form for exactly 1, the other for everything else (0 too).
        """
        count = n if isinstance(n, int) and not isinstance(n, bool) else 0
        text = self.translations.ngettext(singular, plural, count)
        return text % {"num": self.num(n, 0), **params} if "%(" in text else text

    def plural(self, forms: tuple[str, str], n) -> str:
        """The form of ``forms`` (an ``NP_`` pair with ``{placeholders}``) for the count ``n`` in this
        language, translated, its placeholders left for ``.format``. A count that is no whole number
        (a rate of 1.5) takes the plural, as 0 does."""
        count = n if isinstance(n, int) and not isinstance(n, bool) else 0
        if isinstance(n, float) and n.is_integer():
            count = int(n)  # a rate of exactly 1, shown as "1"
        return self.translations.ngettext(forms[0], forms[1], count)

    def quote(self, text) -> str:
        """``text`` in this language's quotation marks, for plain text (a page's Markdown quotes with
        ``<q>``, which the browser marks by the page's language): the catalogue holds the marks."""
        return self.gettext(QUOTE).format(text=text)

    def num(self, value, digits: int = 1) -> str:
        """``value`` with ``digits`` decimals and this language's separators, exactly as Babel's
        ``format_decimal`` prints it (half to even, on the value's shortest decimal form)."""
        if not _finite(value):  # None, text from a damaged row, inf: no figure to print
            return "—"
        swap = self.code in _SWAPPED_SEPARATORS
        if not swap and self.code not in _PYTHON_SEPARATORS:
            return _decimal_pattern(digits).apply(value, _locale(self.code))
        # what Babel prints for en and de (tests/test_i18n_numbers.py holds them equal), without its pattern
        # machinery: a build formats hundreds of thousands of figures (the evidence pages' tables)
        quantum = _QUANTUM.get(digits) or Decimal(1).scaleb(-digits)
        text = f"{Decimal(str(value)).quantize(quantum, rounding=ROUND_HALF_EVEN):,.{digits}f}"
        return text.translate(_SWAP) if swap else text

    def fig(self, kind: str, value) -> str:
        """A measured quantity rounded as everywhere else on the site (report/figures.py)."""
        from cardproof.report.figures import DIGITS

        return self.num(value, DIGITS[kind])

    def rule_value(self, name: str, value, text: str = "") -> str:
        """A value a rule read, rounded as its quantity is in the tables (report/figures.py)."""
        from cardproof.report.figures import rule_digits

        if not _finite(value):
            return self.num(value)
        return self.num(value, rule_digits(name, float(value), text))

    def pct(self, value, digits: int = 0) -> str:
        if not _finite(value):
            return "—"
        fmt = "#,##0" + ("." + "0" * digits if digits else "") + "\u00a0%"
        return format_percent(value, format=fmt, locale=self.code)

    def share(self, value) -> str:
        """A share in percent with the fewest digits (0 to 2) that keep it apart from 0 % and 100 %: 2 of
        1,299 is "0.2 %", not "0 %", and 1,298 of 1,299 "99.9 %", not "100 %"; past two digits, "<0.01 %"
        and ">99.99 %"."""
        if not _finite(value):
            return "—"
        for digits in (0, 1, 2):
            shown = round(value * 100, digits)
            if (shown != 0 or value == 0) and (shown != 100 or value == 1):
                return self.pct(value, digits)
        return ("<" + self.pct(0.0001, 2)) if value < 0.5 else (">" + self.pct(0.9999, 2))

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
            from .mdsafe import code_span  # late: mdsafe's escapers build on this module's Lang

            return code_span(str(iso)[:80])

    def size(self, n_bytes) -> str:
        if not _finite(n_bytes):
            return "—"
        if n_bytes >= 2**30:
            return f"{self.num(n_bytes / 2**30, 1)} GiB"
        return f"{self.num(n_bytes / 2**20, 1)} MiB"
