"""A variant whose own log contradicts its arguments: its figures are of another setting than its name says.

A build may ignore or cap an argument (``-ub 4096`` with the default batch of
2,048 runs at 2,048; a cache type without flash attention may be refused
back to f16). Figures measured so are real, but not of the variant asked
for: the Variants section states no ratio and no best from them, and this
caveat says which argument the log contradicts, and what it says instead.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Caveat, CaveatRule

TITLE = N_("A variant's log contradicts its arguments: no finding is stated from it")
TEXT = N_('{variant} asked for {flag} {value}; the load\'s log says {observed}. Its figures are shown, '
          'but they are not those of the setting it names.')


def check(view: dict) -> list[Caveat]:
    out = []
    for group in view.get("variants") or []:
        for v in group["variants"]:
            if v.get("status") != "contradicted":
                continue
            cells = tuple(c["id"] for c in v.get("cells", {}).values() if c)
            for c in v.get("checks", []):
                if c.get("status") == "contradicted":
                    out.append(Caveat("variant_contradicted", "warning", TITLE, TEXT,
                                      {"variant": v["model"], "flag": c.get("flag") or "",
                                       "value": c.get("value") or "", "observed": c.get("observed") or ""},
                                      cells))
    return out


RULE = CaveatRule('variant_contradicted', check, order=24)
