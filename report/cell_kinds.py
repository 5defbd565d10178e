"""The kinds of cell a run measures, in one table: what a series of each shows, and how its step is named.

A cell is a prompt class at one reasoning setting (``measure``), or a step of
the load, rate or depth axis (daemon/run/load/): a number of concurrent streams,
an offered request rate, a context depth. The trend pages, their charts and
anchors, the series' queries and the gates' per-step notes all tell the kinds
apart; they read it here, so a new kind of step is one row of ``KINDS``.

In short, ``cell_kinds.py``: the table of cell kinds (``measure``, and the ``load``,
``rate`` and ``depth`` steps): each kind's metrics, the field that places a step on its axis, its
words and page anchor, its order; the trend series, pages, charts and the gates' per-step notes read
it rather than comparing kind names
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from cardproof.daemon.store.stats import rate_digits
from cardproof.marks import NP_

MEASURE = "measure"
#: a load step's first words: a count meets a noun (one stream, two streams)
LOAD_STREAMS = NP_("load: {n} stream", "load: {n} streams")


@dataclass(frozen=True)
class CellKind:
    """One kind of cell: ``cells.kind`` and ``samples.kind`` (NULL in an older store is ``measure``)."""

    name: str
    #: the metrics a series of this kind shows, in the page's order
    metrics: tuple[str, ...]
    #: the cell row's and series' field that places a step on its axis (None: a prompt-class cell)
    axis: str | None = None
    #: a step of requests sent together or at a rate: the step's aggregate tok/s and p90 TTFT are figures
    sends_load: bool = False
    #: the step's own words, translated, and the figures they take: ``load: {n} streams``
    words: Callable[[dict, object], tuple[str, dict]] | None = None
    #: the step's value in a page anchor (a dot would end the anchor in some readers' eyes)
    anchor_value: Callable[[dict], str] | None = None

    def axis_value(self, row: dict):
        """The step's value on its axis as the series keep it (a rate as a float); None for ``measure``."""
        if self.axis is None:
            return None
        value = row[self.axis]
        return float(value) if self.axis == "rate_rps" else value

    def placed(self, row: dict) -> bool:
        """Whether a step row has a value that places it: positive streams or depth, a finite positive rate
        (a damaged row has none)."""
        if self.axis is None:
            return True
        v = row[self.axis]
        if self.axis == "rate_rps":
            return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf
        return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _rate_anchor(s: dict) -> str:
    return f"{s['rate_rps']:.{rate_digits(s['rate_rps'])}f}".replace(".", "p")


#: every kind, in the order the trend pages list their series
KINDS: dict[str, CellKind] = {k.name: k for k in (
    CellKind(MEASURE, ("decode_tps", "prefill_tps", "ttft_ms", "load_seconds")),
    CellKind("load", ("decode_tps", "aggregate_tps", "ttft_ms", "ttft_p90_ms"), axis="streams", sends_load=True,
             words=lambda s, L: (L.plural(LOAD_STREAMS, s["streams"]), {"n": L.num(s["streams"], 0)}),
             anchor_value=lambda s: str(int(s["streams"]))),
    CellKind("rate", ("decode_tps", "aggregate_tps", "ttft_ms", "ttft_p90_ms"), axis="rate_rps", sends_load=True,
             words=lambda s, L: (L.gettext("{rate} requests/s"),
                                 {"rate": L.num(s["rate_rps"], rate_digits(s["rate_rps"]))}),
             anchor_value=_rate_anchor),
    CellKind("depth", ("decode_tps", "prefill_tps"), axis="depth_tokens",
             words=lambda s, L: (L.gettext("depth {tokens} tokens"), {"tokens": L.num(s["depth_tokens"], 0)}),
             anchor_value=lambda s: str(int(s["depth_tokens"]))),
)}
#: the step kinds (every kind but ``measure``), in the table's order
STEP_KINDS = tuple(k for k in KINDS if k != MEASURE)
#: the kinds as an SQL list, for ``where coalesce(kind, 'measure') in ...``
SQL_KINDS = "(" + ", ".join(f"'{k}'" for k in KINDS) + ")"
SQL_STEP_KINDS = "(" + ", ".join(f"'{k}'" for k in STEP_KINDS) + ")"
#: a kind's place in the table, for sorting
ORDER = {k: i for i, k in enumerate(KINDS)}


def kind_of(s: dict) -> CellKind:
    """The kind of a cell or series (a row of an older store has no kind: a prompt-class cell)."""
    return KINDS[s.get("kind") or MEASURE]
