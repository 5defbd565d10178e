"""The probe defects register: an authored TOML file shipped with the probes.

Every verdict is shown with its probe's known defects, so that a statement a
probe makes about a model is read with its limits. A defect marked
``counts = false`` voids differences in that probe between models.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REGISTER = Path(__file__).with_name("defects.toml")
_KEYS = {"defect", "defect_de", "since", "effect", "effect_de", "counts"}
# Authored text carries both languages of the report (issue 14): no German, no entry.
_REQUIRED = {"defect", "defect_de", "since", "effect", "effect_de"}


class DefectsError(Exception):
    """The register is malformed; the message names the file and entry."""


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
            out.setdefault(probe, []).append({"defect": e["defect"], "defect_de": e["defect_de"],
                                              "since": str(e["since"]), "effect": e["effect"],
                                              "effect_de": e["effect_de"], "counts": bool(e.get("counts", True))})
    return out
