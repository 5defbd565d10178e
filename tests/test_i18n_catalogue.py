"""The German catalogue (gettext .po through Babel) is complete and its plurals are right.

Real parts: the package's own .po read by Babel, the strings extracted from
the templates and the report's Python by Babel's extractors with the repo's
babel.cfg (what ``pybabel extract`` does), and the report's own ``Lang``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cardproof.report.i18n import CATALOGUE, Lang, read_catalogue

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = re.compile(r"%\([a-z_]+\)s|\{[a-z_]*\}")


def _extracted() -> dict[str, set[str]]:
    """msgid -> files using it, as scripts/catalogue.py (pybabel extract -F babel.cfg) finds them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("catalogue_script", ROOT / "scripts" / "catalogue.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    found: dict[str, set[str]] = {}
    for msg in script.extract():
        for msgid in (msg.id if isinstance(msg.id, tuple) else (msg.id,)):
            if msgid and msgid.strip():
                found.setdefault(msgid, set()).update(f for f, _ in msg.locations)
    return found


def test_every_msgid_of_the_po_has_non_fuzzy_german():
    catalog = read_catalogue("de")
    assert len(catalog) > 300
    bad = []
    for msg in catalog:
        if not msg.id:
            continue
        forms = msg.string if isinstance(msg.string, tuple) else (msg.string,)
        if msg.fuzzy or not all(f and f.strip() for f in forms):
            bad.append(msg.id)
    assert bad == []


def test_every_string_the_code_uses_has_german():
    """A new _('...'), gettext(...) or ngettext(...) without a German entry in the .po fails here."""
    used = _extracted()
    assert len(used) > 200 and any(f.endswith(".j2") for fs in used.values() for f in fs)
    missing = sorted((msgid, sorted(files)[0]) for msgid, files in used.items()
                     if msgid not in CATALOGUE and msgid not in ("n",))
    assert missing == [], missing[:20]


def test_translations_keep_their_placeholders():
    """A German text that drops or renames {x} / %(x)s would print the wrong figure or crash."""
    bad = []
    for msg in read_catalogue("de"):
        if not msg.id:
            continue
        ids = msg.id if isinstance(msg.id, tuple) else (msg.id,)
        forms = msg.string if isinstance(msg.string, tuple) else (msg.string,)
        want = set(PLACEHOLDER.findall(ids[-1]))
        for form in forms:
            if set(PLACEHOLDER.findall(form)) != want:
                bad.append((ids[0], form))
    assert bad == []


def _plurals():
    return [m for m in read_catalogue("de") if m.id and isinstance(m.id, tuple)]


def test_there_are_plural_messages():
    assert len(_plurals()) >= 1


@pytest.mark.parametrize("n", [0, 1, 2])
def test_plural_forms_for_zero_one_two_in_both_languages(n):
    for msg in _plurals():
        singular, plural = msg.id
        # the other values a sentence counts beside its noun ("%(followed)s of %(num)s answers")
        others = {k: f"<{k}>" for k in re.findall(r"%\((\w+)\)s", plural) if k != "num"}

        def filled(text):
            for k, v in others.items():
                text = text.replace(f"%({k})s", v)
            return text.replace("%(num)s", str(n))

        en = Lang("en").ngettext(singular, plural, n, **others)
        de = Lang("de").ngettext(singular, plural, n, **others)
        assert en == filled(singular if n == 1 else plural)
        assert de == filled(msg.string[0 if n == 1 else 1])
        assert de != en


def test_plurals_have_no_1_samples_kind_of_text():
    """The forms for exactly one never carry a plural ending, in either language."""
    for msg in _plurals():
        others = {k: "2" for k in re.findall(r"%\((\w+)\)s", msg.id[1]) if k != "num"}
        one_en = Lang("en").ngettext(*msg.id, 1, **others)
        one_de = Lang("de").ngettext(*msg.id, 1, **others)
        assert not re.search(r"\b1 \w+s were\b", one_en), one_en
        assert not re.search(r"\b1 Messungen\b|\bwurden\b", one_de), one_de


def test_counts_are_formatted_per_locale():
    msg = next(m for m in _plurals() if re.findall(r"%\((\w+)\)s", m.id[1]) == ["num"])
    assert "1,234" in Lang("en").ngettext(*msg.id, 1234)
    assert "1.234" in Lang("de").ngettext(*msg.id, 1234)
    assert "—" in Lang("de").ngettext(*msg.id, None)  # no count: a dash, never a crash


def _glossary_never() -> dict[str, str]:
    """German words docs/GLOSSARY.md rules out, each with the English term it belongs to."""
    never: dict[str, str] = {}
    for line in (ROOT / "docs" / "GLOSSARY.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("English", "---") or set(cells[0]) <= {"-"}:
            continue
        for word in cells[2].split(","):
            if word.strip() and word.strip() != "—":
                never[word.strip()] = cells[0]
    return never


def test_german_follows_the_glossary():
    never = _glossary_never()
    assert {"Kanarienvogel", "Dekodieren", "tok/s", "Stichprobe"} <= set(never)
    bad = []
    for msg in read_catalogue("de"):
        if not msg.id:
            continue
        for form in msg.string if isinstance(msg.string, tuple) else (msg.string,):
            for word, term in never.items():
                if re.search(r"(?<![\w/.])" + re.escape(word) + r"(?![\w/])", form):
                    bad.append((term, word, form[:80]))
    assert bad == []
