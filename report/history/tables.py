"""The rows of a trend page's cell tables as trusted Markdown, built in Python.

A page of a year of nightly runs prints hundreds of rows with a dozen
figures each; through the template every figure, run id and count went
through the page's escaping and masking one expression at a time (most of a
trend page's time). Here each row is put together once from parts that are
already safe: numbers from ``numbers.formatter``, dates and builds escaped
once per distinct value, catalogue messages via the page's translator.
The row's layout is the one the template printed before.
"""

from __future__ import annotations

from ..i18n import Lang
from ..mdsafe import MD, code_span, esc
from .conditions import label
from .numbers import dates, formatter
from .series import OK


def row_maker(L: Lang, _):
    """``row(point, metrics) -> MD``: one table row of a point, in ``L``, with a column per metric."""
    num, when = formatter(L), dates(L)
    builds: dict = {}
    states: dict = {}
    changed = _("changed")

    def build(value) -> MD:
        if value not in builds:
            builds[value] = code_span(value or "—")
        return builds[value]

    def state(value) -> MD:
        if value not in states:
            states[value] = _("usable") if value == OK else _(value)
        return states[value]

    def row(p: dict, metrics: list[str]) -> MD:
        # a point of a run that did not change keeps its rows from the last build (render.py
        # report/history/pages.py), by what else the row shows (its language, the columns, the state and the
        # conditions that changed since the point before it, which a deleted run can change)
        key = (L.code, tuple(metrics), p["state"], repr(p["changes"]) if p["changes"] else "", p.get("anchor"))
        kept = p.get("_rows")
        if type(kept) is dict and type(kept.get(key)) is str:
            return MD(kept[key])
        text = _row(p, metrics)
        if type(kept) is not dict:
            kept = p["_rows"] = {}
        kept[key] = str(text)
        return text

    def _row(p: dict, metrics: list[str]) -> MD:
        # every part is trusted Markdown already (numbers, dates, builds, catalogue messages: each an ``MD``,
        # ``esc`` passes those unchanged) or made here from integers: joined as text once, not part by part
        rid = int(p["run_id"])
        anchor = p.get("anchor") or f"cell-{int(p['cell_id'])}"  # built by series.py from ids: no foreign text
        parts = [f"| [{rid}](../runs/run-{rid}.md) | ", esc(when(p["started_at"])), " | ",
                 esc(build(p["server_build"])), " | "]
        evidence = f"](../runs/run-{rid}-evidence.md#{anchor})<br><small>"
        for m in metrics:
            s = p["spread"].get(m)
            if s:
                parts.append(f"[{esc(num(s.median))}{evidence}{esc(num(s.low))}–{esc(num(s.high))} · n={int(s.n)}"
                             "</small> | ")
            else:
                parts.append("— | ")
        parts.append(esc(state(p["state"])))
        if p["changes"]:
            parts += [" · ", esc(changed), ": ", ", ".join(esc(label(d, L)) for d in p["changes"])]
        parts.append(" |")
        return MD("".join(parts))

    return row
