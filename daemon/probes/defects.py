"""The probe defects register: an authored TOML file shipped with the probes.

Every verdict is shown with its probe's known defects, so that a statement a
probe makes about a model is read with its limits. A defect marked
``counts = false`` voids differences in that probe between models.

Counts a defect quotes ("four small functions with four to six tests each")
are never typed into the register: a text names them as ``{placeholders}``
and the probe's own definition fills them (``Probe.facts``, in the words of
each language), so the note cannot fall behind the tasks it describes. The
register is English; each text is a msgid of the report's catalogue, where
its German lives (``cardproof.marks.extract_toml`` extracts them).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from string import Formatter
from typing import Callable

from cardproof.marks import N_

REGISTER = Path(__file__).with_name("defects.toml")
_KEYS = {"defect", "since", "effect", "counts"}
_REQUIRED = {"defect", "since", "effect"}


class DefectsError(Exception):
    """The register is malformed; the message names the file and entry."""


_WORDS = (N_("zero"), N_("one"), N_("two"), N_("three"), N_("four"), N_("five"), N_("six"), N_("seven"),
          N_("eight"), N_("nine"), N_("ten"), N_("eleven"), N_("twelve"))
_SPAN = N_("{low} to {high}")


def _english(text: str) -> str:
    return text


def number_words(n: int, say: Callable[[str], str] = _english) -> str:
    """A count as a reader says it, in the language of ``say`` (a gettext; digits past twelve)."""
    return say(_WORDS[n]) if 0 <= n < len(_WORDS) else str(n)


def span_words(low: int, high: int, say: Callable[[str], str] = _english) -> str:
    """"four" or "four to six" in the language of ``say``."""
    if low == high:
        return number_words(low, say)
    return say(_SPAN).format(low=number_words(low, say), high=number_words(high, say))


def _facts(probe: str, say: Callable[[str], str]) -> dict[str, str]:
    """What the probe's definition says of itself, for the register's placeholders; each word value also
    capitalised (``{Tasks}`` beside ``{tasks}``) for the start of a sentence."""
    from . import PROBES  # the register is read by the report too: the probes load only when it is

    entry = PROBES.get(probe)
    facts = dict(entry.facts(say)) if entry is not None and entry.facts is not None else {}
    return facts | {k[:1].upper() + k[1:]: v[:1].upper() + v[1:] for k, v in facts.items() if isinstance(v, str)}


def _fill(text: str, facts: dict[str, str], where: str) -> str:
    wanted = {name for _, name, _, _ in Formatter().parse(text) if name is not None}
    missing = sorted(wanted - set(facts))
    if missing:
        raise DefectsError(f"{where}: the probe's definition gives no {', '.join('{' + m + '}' for m in missing)}")
    return text.format_map(facts)


def in_language(entry: dict, key: str, say: Callable[[str], str]) -> str:
    """An entry's ``defect`` or ``effect`` in the language of ``say`` (the catalogue's gettext for the
    register's English text, which is a msgid), its counts in that language's words."""
    return _fill(say(entry["texts"][key]), _facts(entry["probe"], say), f"{REGISTER}: {entry['probe']}.{key}")


def load_defects(path: Path | str | None = None) -> dict[str, list[dict]]:
    """probe name -> its defects ({defect, since, effect, counts}, in English, with ``texts``: the
    register's msgids before the counts are filled, for :func:`in_language`) from the register."""
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
            en = _facts(probe, _english)
            out.setdefault(probe, []).append({
                "probe": probe, "defect": _fill(e["defect"], en, f"{where}.defect"), "since": str(e["since"]),
                "effect": _fill(e["effect"], en, f"{where}.effect"), "counts": bool(e.get("counts", True)),
                "texts": {"defect": e["defect"], "effect": e["effect"]}})
    return out
