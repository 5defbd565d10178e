"""The probe defects register: an authored TOML file shipped with the probes.

Every verdict is shown with its probe's known defects, so that a statement a
probe makes about a model is read with its limits. A defect marked
``counts = false`` voids differences in that probe between models.

Counts a defect quotes ("four small functions with four to six tests each")
are never typed into the register: a text names them as ``{placeholders}``
and the probe's own definition fills them (``Probe.facts``, in each
language), so the note cannot fall behind the tasks it describes.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from string import Formatter

REGISTER = Path(__file__).with_name("defects.toml")
_KEYS = {"defect", "defect_de", "since", "effect", "effect_de", "counts"}
# Authored text carries both languages of the report: no German, no entry.
_REQUIRED = {"defect", "defect_de", "since", "effect", "effect_de"}


class DefectsError(Exception):
    """The register is malformed; the message names the file and entry."""


_WORDS = {
    "en": ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"),
    "de": ("null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "elf", "zwölf"),
}
_TO = {"en": "to", "de": "bis"}


def number_words(n: int, lang: str) -> str:
    """A count as a reader says it in ``lang`` (digits past twelve)."""
    words = _WORDS[lang]
    return words[n] if 0 <= n < len(words) else str(n)


def span_words(low: int, high: int, lang: str) -> str:
    """"four" or "four to six" in ``lang``."""
    if low == high:
        return number_words(low, lang)
    return f"{number_words(low, lang)} {_TO[lang]} {number_words(high, lang)}"


def _facts(probe: str, lang: str) -> dict[str, str]:
    """What the probe's definition says of itself, for the register's placeholders; each word value also
    capitalised (``{Tasks}`` beside ``{tasks}``) for the start of a sentence."""
    from . import PROBES  # the register is read by the report too: the probes load only when it is

    entry = PROBES.get(probe)
    facts = dict(entry.facts(lang)) if entry is not None and entry.facts is not None else {}
    return facts | {k[:1].upper() + k[1:]: v[:1].upper() + v[1:] for k, v in facts.items() if isinstance(v, str)}


def _fill(text: str, facts: dict[str, str], where: str) -> str:
    wanted = {name for _, name, _, _ in Formatter().parse(text) if name is not None}
    missing = sorted(wanted - set(facts))
    if missing:
        raise DefectsError(f"{where}: the probe's definition gives no {', '.join('{' + m + '}' for m in missing)}")
    return text.format_map(facts)


def load_defects(path: Path | str | None = None) -> dict[str, list[dict]]:
    """probe name -> its defects ({defect, defect_de, since, effect, effect_de, counts}) from the register."""
    p = Path(path) if path else REGISTER
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DefectsError(f"{p}: {exc}") from exc
    out: dict[str, list[dict]] = {}
    for probe, entries in data.items():
        if not isinstance(entries, list):
            raise DefectsError(f"{p}: {probe}: expected [[{probe}]] entries")
        for i, e in enumerate(entries):
            missing = _REQUIRED - set(e)
            extra = set(e) - _KEYS
            if missing or extra:
                raise DefectsError(f"{p}: {probe}[{i}]: missing {sorted(missing)} / unknown {sorted(extra)}")
            where = f"{p}: {probe}[{i}]"
            en, de = _facts(probe, "en"), _facts(probe, "de")
            out.setdefault(probe, []).append({
                "defect": _fill(e["defect"], en, f"{where}.defect"), "defect_de": _fill(e["defect_de"], de, f"{where}.defect_de"),
                "since": str(e["since"]), "effect": _fill(e["effect"], en, f"{where}.effect"),
                "effect_de": _fill(e["effect_de"], de, f"{where}.effect_de"), "counts": bool(e.get("counts", True))})
    return out
