"""Text that comes from data is German on German pages: probe defects, gate units, load status.

Real parts: the shipped defects register and gate modules, the package's .po
through ``Lang``, and the report's own ``_()`` (which escapes anything that is
not ours).
"""

from __future__ import annotations

import pytest

from cardproof.daemon.gates import GATES
from cardproof.daemon.probes.defects import DefectsError, in_language, load_defects
from cardproof.report.i18n import CATALOGUE, Lang, read_catalogue
from cardproof.report.mdsafe import translator


def test_every_probe_defect_has_german_and_the_report_uses_it():
    register = load_defects()
    entries = [d for ds in register.values() for d in ds]
    assert len(entries) >= 8
    _ = translator(Lang("de").gettext, CATALOGUE)
    german = {m.id: m.string for m in read_catalogue("de") if m.id}
    for d in entries:
        for key in ("defect", "effect"):
            assert german.get(d["texts"][key], "").strip(), f"no German for {d['texts'][key]!r}"
            assert str(_(d[key])) != d[key] and str(_(d[key])) == in_language(d, key, Lang("de").gettext)


def test_a_defect_without_its_effect_is_refused_naming_file_and_entry(tmp_path):
    bad = tmp_path / "defects.toml"
    bad.write_text('[[tools]]\ndefect = "x"\nsince = "0.1"\n')
    with pytest.raises(DefectsError, match=r"defects\.toml: tools\[0\]: missing \['effect'\]"):
        load_defects(bad)


def test_gate_units_and_load_statuses_have_german():
    de = Lang("de")
    units = {g.threshold_unit for g in GATES.values() if g.threshold_unit}
    assert {"chars", "tokens or requests"} <= units
    for text in units | {"loaded", "already_loaded", "failed", "refused", "tok/s"}:
        assert text in CATALOGUE, text
    assert de.gettext("chars") == "Zeichen" and de.gettext("loaded") == "geladen" and de.gettext("tok/s") == "Tok./s"


def test_text_from_data_outside_the_catalogue_stays_escaped():
    """A server's own status or a foreign unit is shown as the text it is, never trusted Markdown."""
    _ = translator(Lang("de").gettext, CATALOGUE)
    assert str(_("<b>loaded</b>")) != "<b>loaded</b>"
