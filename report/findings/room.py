"""Room on the card: which other model of the campaign fits beside the pinned one, by the card's own readings.

A campaign with a model in production asks one question beyond speed: can
the candidate run beside it, or does it push it out? The card's memory per
process (NVML) of each measured load answers it for this card, with the
figures; without card readings (no driver, CPU only) nothing is said, since a
file size or a self-report is no reading of the card.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line
from .pick import card_rows, number

TITLE = N_("Room on the card beside {pin}")
TEXT_ALL = N_("Beside the pinned {pin} ({pin_mib} on the cards), the cards ({total}) have room for each other model of "
              "the campaign: {fit}.")
TEXT_NONE = N_("Beside the pinned {pin} ({pin_mib} on the cards), the cards ({total}) have room for none of the other "
               "models of the campaign: {short}.")
TEXT_SOME = N_("Beside the pinned {pin} ({pin_mib} on the cards), the cards ({total}) have room for {fit}, not for "
               "{short}.")
FITS = N_("{model}: {mib} on the cards, {left} would be left")
SHORT = N_("{model}: {mib} on the cards, {over} more than is left beside the pin")
CONDITION = N_("Every figure is the card's own reading (NVML) of a model's measured load, and the total is what the cards "
               "reported.")
CAVEAT = N_("Each model was measured alone: side by side, both also need their KV caches and compute buffers at the "
            "contexts they will serve, and a margin of a few percent of the card is no room in practice.")


def check(view: dict) -> list[Finding]:
    cards = card_rows(view)
    pins = [m["name"] for m in view["models"] if m.get("pinned") and m["name"] in cards]
    if len(pins) != 1:
        return []
    pin = cards[pins[0]]
    total = (pin.get("budget") or {}).get("total_mib")
    if not number(total) or len(cards) < 2:
        return []
    fit, short, lines = [], [], []
    for name, row in cards.items():
        if name == pins[0]:
            continue
        left = total - pin["card_mib"] - row["card_mib"]
        mib = Fig(row["card_mib"], "mib", link=f"fig-load-{row['load_id']}")
        if left >= 0:
            fit.append(name)
            lines.append(Line(FITS, {"model": name, "mib": mib, "left": Fig(left, "mib")}))
        else:
            short.append(name)
            lines.append(Line(SHORT, {"model": name, "mib": mib, "over": Fig(-left, "mib")}))
    text = TEXT_ALL if not short else TEXT_NONE if not fit else TEXT_SOME
    params = {"pin": pins[0], "pin_mib": Fig(pin["card_mib"], "mib", link=f"fig-load-{pin['load_id']}"),
              "total": Fig(total, "mib"), "fit": fit, "short": short}
    return [Finding("room", f"room:{pins[0]}", TITLE, text, params, tuple(lines), Line(CONDITION), Line(CAVEAT))]


RULE = FindingRule("room", check, order=70)
