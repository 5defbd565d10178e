"""Models requantized from another model of the run: a ladder of one set of weights.

``llama-quantize --allow-requantize`` turns a Q4_1 into a Q8_0 or an F16, but
the values it writes are Q4_1's: nothing the Q4_1 lost comes back. Such a
ladder can show what the format costs in speed and memory, never what it costs
in quality, and a reader who sees "F16" in a table assumes the latter. The
campaign says which file was made from which (``[[models]] requantized_from``);
the frozen text is read here, so the caveat holds for the run as registered.
"""

from __future__ import annotations

from cardproof.marks import N_
from ..findings.inputs import requantized as _requantized
from .base import Caveat, CaveatRule

TITLE = N_('Requantized from one file: speed and memory differ, the weights do not')
TEXT = N_('{model} was made from {base} with llama-quantize --allow-requantize, so it carries the weights '
          'of {base}: the two can differ in speed and memory, not in what the model learned. Their answers '
          'can still differ a little, because each format computes with other rounding.')


def check(view: dict) -> list[Caveat]:
    made = _requantized(view["run"].get("campaign_text"))
    first_cell: dict[str, int] = {}
    for c in view["cells"]:
        first_cell.setdefault(c["model"], c["id"])
    return [
        Caveat("requantized", "note", TITLE, TEXT, {"model": model, "base": base},
               tuple(first_cell[m] for m in (model, base) if m in first_cell))
        for model, base in made.items() if model in first_cell and base in first_cell
    ]


RULE = CaveatRule('requantized', check, order=22)
