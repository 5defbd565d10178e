"""The committed catalogue is what a fresh extraction of the code gives (scripts/catalogue.py).

Real parts: Babel's extractors over the repository with its babel.cfg, the
committed report/locale/cardproof.pot and the German .po.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("catalogue_script", ROOT / "scripts" / "catalogue.py")
catalogue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(catalogue)


def test_a_fresh_extraction_equals_the_committed_pot():
    """A string added to the code without ``python scripts/catalogue.py`` fails here."""
    fresh = catalogue.without_date(catalogue.render(catalogue.extract()))
    assert fresh == catalogue.without_date(catalogue.POT.read_bytes())


def test_the_german_po_has_exactly_the_pot_msgids():
    """Every German msgid is one the code uses: nothing a ``pybabel update`` would mark obsolete."""
    def ids(path):
        with open(path, "rb") as f:
            return {m.id for m in read_po(f) if m.id}

    assert ids(catalogue.PO_DE) == ids(catalogue.POT)


def test_the_extractor_reads_marks_inside_f_strings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('x = f"{_(\'Inside an f-string\')} {L.gettext(\'and by a method\')}"\nN_("marked")\n')
    from cardproof.marks import extract_python

    with open(source, "rb") as f:
        found = {m for _line, _name, m, _c in extract_python(f, catalogue.KEYWORDS, [], {})}
    assert {"Inside an f-string", "and by a method", "marked"} <= found
