"""Regenerate the message catalogue from the code: report/locale/cardproof.pot and the German .po.

    python scripts/catalogue.py          # extract, write the .pot, update the German .po
    python scripts/catalogue.py --check  # exit 1 when the committed .pot differs from a fresh extraction

The same as ``pybabel extract -F babel.cfg -k N_ -k Said --no-location --sort-output
-o report/locale/cardproof.pot . && pybabel update -i report/locale/cardproof.pot -d
report/locale -D cardproof --no-location --no-fuzzy-matching``, kept as Python so that
tests/test_i18n_extraction.py runs exactly what a translator runs. A msgid the code no
longer uses is dropped from the .po (its German is in git), a new one arrives with an
empty msgstr that tests/test_i18n_catalogue.py reports until it has German.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
POT = ROOT / "report" / "locale" / "cardproof.pot"
PO_DE = ROOT / "report" / "locale" / "de" / "LC_MESSAGES" / "cardproof.po"
# _/gettext/ngettext translate where they stand; N_ marks a constant translated where it is shown;
# Said (the daemon's stored sentence), Term and Line (report/findings/) carry a msgid first.
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "NP_": (1, 2), "Said": None, "Term": None, "Line": None}
WIDTH = 100
_DATE = re.compile(rb'^"POT-Creation-Date: [^"]*"\n', re.M)


def extract() -> Catalog:
    """Every string the code marks, as ``pybabel extract -F babel.cfg`` with KEYWORDS finds it."""
    with open(ROOT / "babel.cfg") as f:
        method_map, options_map = parse_mapping_cfg(f)
    catalog = Catalog(project="cardproof", version="0.1", copyright_holder="cardproof", charset="utf-8")
    for filename, lineno, message, _comments, context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS):
        if (message[0] if isinstance(message, tuple) else message).strip():
            catalog.add(message, None, [(filename, lineno)], context=context)
    return catalog


def render(catalog: Catalog) -> bytes:
    """The .po/.pot text as committed: sorted, no source locations."""
    buf = io.BytesIO()
    write_po(buf, catalog, width=WIDTH, no_location=True, sort_output=True, include_previous=False)
    return buf.getvalue()


def without_date(text: bytes) -> bytes:
    """The catalogue text less its creation date, which changes on every extraction."""
    return _DATE.sub(b"", text)


def update_german(template: Catalog) -> Catalog:
    """The German .po brought up to ``template``: German kept per msgid, unused msgids dropped."""
    with open(PO_DE, "rb") as f:
        german = read_po(f, locale="de", domain="cardproof")
    german.update(template, no_fuzzy_matching=True)
    german.obsolete.clear()
    return german


def main(argv: list[str]) -> int:
    fresh = render(extract())
    if "--check" in argv:
        if without_date(fresh) != without_date(POT.read_bytes()):
            print(f"{POT.relative_to(ROOT)} differs from a fresh extraction: run python scripts/catalogue.py",
                  file=sys.stderr)
            return 1
        return 0
    POT.write_bytes(fresh)
    german = update_german(read_po(io.BytesIO(fresh)))
    PO_DE.write_bytes(render(german))
    untranslated = [m.id for m in german if m.id and not (m.string if isinstance(m.string, str) else all(m.string))]
    print(f"{POT.relative_to(ROOT)}: {len(german) - 1} msgids; {len(untranslated)} without German", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
