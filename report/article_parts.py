"""The pieces of a run article that Python prepares for the template.

The main table's cell figures, the caveat boxes in the page's language, the
exception groups, the charts of one run and the author's notes. Everything
returned is Markdown escaped part by part (``MD``) or plain data.
"""

from __future__ import annotations

from pathlib import Path

from . import charts
from .findings import reasoning_pairs
from .findings.show import _Say
from .i18n import CATALOGUE, Lang
from .mdsafe import MD, code_span, esc, translator
from .observations import quoted
from .quality import chart_rows as quality_chart_rows
from .summary import Code, Seq


def cell_value(L: Lang, cell: dict | None) -> MD:
    """A main-table cell as Markdown: the median linked to its evidence (MD: every part escaped).

    Each cell carries the anchor ``fig-cell-<id>`` its evidence links back to.
    """
    if cell is None:
        return MD("—")
    return MD('<span id="fig-cell-{}"></span>').format(cell["id"]) + _cell_figure(L, cell)


def _cell_figure(L: Lang, cell: dict) -> MD:
    link = MD("[{}](#cell-{})")
    d = cell["decode"]
    if d is None:
        if cell["excluded"] and not cell["errors"]:
            gates = sorted({str(g) for x in cell["excluded"] for g in x["excluded_by"]})
            return link.format(L.gettext("excluded"), cell["id"]) + MD(" ({})").format(MD(", ").join(gates))
        if not cell["errors"]:
            return MD("—")
        kinds = {s["error_kind"] for s in cell["errors"]}
        # "crash" only where the server went away; a refused request is an error
        word = "crash" if "connection" in kinds else ("timeout" if kinds == {"timeout"} else "error")
        return link.format(L.gettext(word), cell["id"])
    # the median on the first line, its spread on a second, smaller one (rounded once, as in the chart data)
    out = link.format(L.num(d.median), cell["id"]) + MD("<br><small>{}–{} · n={}</small>").format(
        L.num(d.low), L.num(d.high), d.n)
    if cell.get("unstable"):
        out += MD(" <small>**{}**</small>").format(L.gettext("unstable"))
    return out


def render_caveat(c, L: Lang) -> dict:
    """Title and text of a caveat in ``L``'s language, numbers formatted for it.

    The message comes from the catalogue (trusted); every parameter is
    escaped on its way in (``MD.format``), a prompt class translated first.
    """
    _ = translator(L.gettext, CATALOGUE)
    params = {}
    for key, value in c.params.items():
        if isinstance(value, tuple) and value[0] == "pct":  # a share: never "0 %" for some, "100 %" for not all
            params[key] = L.share(value[1])
        elif isinstance(value, tuple) and value[0] == "int":
            params[key] = L.num(value[1], 0)
        elif isinstance(value, tuple) and value[0] == "num2":
            params[key] = L.num(value[1], 2)
        elif isinstance(value, tuple) and value[0] == "cells":
            # model · class (· reasoning on), escaped part by part
            params[key] = MD("; ").join(
                MD("{} · {}{}").format(model, _(cls), MD(" · ") + _("reasoning on") if r else MD(""))
                for model, cls, r in value[1])
        elif isinstance(value, tuple) and value[0] == "code":
            params[key] = code_span(str(value[1]))  # a name from elsewhere (an error kind): as written
        elif isinstance(value, tuple) and value[0] == "quoted":
            params[key] = quoted(value[1])  # a server's own words are evidence: quoted, never prose
        elif key == "cls":
            params[key] = _(value)
        else:
            params[key] = value
    if isinstance(c.text, tuple):  # a count: the form for it in this language (ngettext)
        n = c.params.get(c.count)
        n = n[1] if isinstance(n, tuple) else n
        count = n if isinstance(n, int) and not isinstance(n, bool) else 0
        form = L.translations.ngettext(c.text[0], c.text[1], count)
        text = MD(form) if c.text[0] in CATALOGUE else esc(form)
    else:
        text = _(c.text)
    return {
        "kind": c.kind,
        "title": _(c.title),
        "text": text.format(**params),
        "cells": c.cells,
    }


def merged_caveats(caveats: list, L: Lang) -> list[dict]:
    """One box per caveat rule: every affected model/class is an item of it, with its evidence links.

    A rule that fired once keeps its own title and text; several findings of
    one rule become a list under the rule's title, never repeated boxes.
    """
    boxes: dict[str, dict] = {}
    for c in caveats:
        r = render_caveat(c, L)
        box = boxes.setdefault(c.rule, {"rule": c.rule, "kind": r["kind"], "title": r["title"], "items": []})
        box["items"].append(r)
    return list(boxes.values())


def exception_groups(view: dict) -> list[dict]:
    """One entry per cell with exceptions: how many failed, and the first one's kind and text."""
    groups = []
    for c in view["cells"]:
        if not c["errors"]:
            continue
        first = c["errors"][0]
        groups.append(
            {
                "cell_id": c["id"],
                "model": c["model"],
                "prompt_class": c["prompt_class"],
                "reasoning": c["reasoning"],
                "failed": len(c["errors"]),
                "total": len(c["samples"]),
                "kind": first["error_kind"],
                "text": (first["error_text"] or "")[:200],
            }
        )
    return groups


def run_charts(view: dict, L: Lang, img_dir: Path | None) -> dict:
    """Write this run's SVG charts for ``L`` and return what the template needs."""
    out = {"decode": [], "reasoning": None}
    rid = view["run"]["id"]
    by_mode = {reasoning: charts.decode_rows(view, L, reasoning) for reasoning in view["reasoning_modes"]}
    shared = charts.decode_domain(*by_mode.values())  # off and on on one scale
    for reasoning, rows in by_mode.items():
        if not rows:
            continue
        name = f"run-{rid}-decode-{'on' if reasoning else 'off'}-{L.code}.svg"
        title = L.gettext("Decode tok/s, reasoning on") if reasoning else L.gettext("Decode tok/s, reasoning off")
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.decode_chart(rows, L, title=title, domain=shared))
        out["decode"].append({"reasoning": reasoning, "file": f"img/{name}", "rows": rows})
    out["memory"] = None
    rows = charts.memory_rows(view.get("memory") or {}, L)
    if rows:
        name = f"run-{rid}-memory-{L.code}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.memory_chart(rows, L))
        out["memory"] = {"file": f"img/{name}", "rows": rows}
    out["variants"] = []
    for metric, title in (("decode", L.gettext("Decode tok/s of each model and its variants, median with min–max")),
                          ("prefill", L.gettext("Prefill tok/s of each model and its variants, median with min–max"))):
        rows = variant_chart_rows(view, metric, L)
        if not rows:
            continue
        name = f"run-{rid}-variants-{metric}-{L.code}.svg"
        if img_dir is not None:
            axis = L.gettext("decode tok/s (median, min–max)") if metric == "decode" \
                else L.gettext("prefill tok/s (median, min–max)")
            charts.write_svg(img_dir / name, charts.decode_chart(rows, L, axis_title=axis))
        out["variants"].append({"metric": metric, "title": title, "file": f"img/{name}", "rows": rows})
    out["quality"] = []
    for i, ladder in enumerate((view.get("quality") or {}).get("ladders", [])):
        if not ladder.get("chart"):
            continue
        rows = quality_chart_rows(ladder)
        name = f"run-{rid}-quality-{i}-{L.code}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.quality_chart(rows, L))
        out["quality"].append({"base": ladder["base"], "file": f"img/{name}", "rows": rows})
    out["reasoning_left_out"] = reasoning_pairs(view)[1]
    # every measured cell with reasoning off (a campaign of reasoning = [false], a model with no thinking mode)
    out["reasoning_off_only"] = bool(view["models"]) and not any(
        on for m in view["models"] for (_cls, on) in m["cells"])
    rows = charts.reasoning_rows(view, L)
    if rows:
        name = f"run-{rid}-reasoning-{L.code}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.reasoning_chart(rows, L, title=L.gettext("Decode change with reasoning on")))
        out["reasoning"] = {"file": f"img/{name}", "rows": rows}
    return out


def author_notes(project: Path | None, run_id: int, lang: str) -> dict:
    """Hand-written Markdown placed around the generated parts (author's notes)."""
    out = {"intro": "", "outro": ""}
    if project is None:
        return out
    for part in out:
        p = Path(project) / "notes" / f"run-{run_id}.{part}.{lang}.md"
        if p.exists():
            # the author's own Markdown: as trusted as the templates
            out[part] = MD(p.read_text(encoding="utf-8").strip())
    return out


def variant_chart_rows(view: dict, metric: str, L) -> list[dict]:
    """Rows of the Variants chart for ``metric``: each base and its variants per class, median with min–max."""
    out = []
    for group in view.get("variants") or []:
        for pc in group["classes"]:
            if pc["reasoning"]:
                continue
            pairs = [(group["base"], pc["base_cell"])] + [(e["variant"]["model"], e["cell"]) for e in pc["entries"]]
            for name, c in pairs:
                s = c.get(metric) if c else None  # the cell's decode or prefill spread
                if s is None:
                    continue
                out.append({"model": charts._label(name), "class": charts._label(L.gettext(pc["cls"])),
                            "median": s.median, "low": s.low, "high": s.high, "n": s.n, "cell": c["id"],
                            "unstable": bool(c.get("unstable")),
                            "stability": L.gettext("unstable") if c.get("unstable") else L.gettext("stable")})
    return out


class _SaySummary(_Say):
    """The findings' way of saying values, plus ``Seq`` (a list with its own separator) and ``Code``."""

    def value(self, v):
        if isinstance(v, Seq):
            return MD(v.sep).join(self.value(x) for x in v.items)
        if isinstance(v, Code):
            return code_span(v.text)
        return super().value(v)


def summary_paragraph(lines: list, L: Lang) -> MD:
    """The summary's sentences (``report.summary.summary_lines``) as one paragraph in ``L``'s language."""
    say = _SaySummary(L)
    return MD(" ").join(say.line(line) for line in lines)
