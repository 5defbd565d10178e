"""Charts as static SVG (Altair rendered offline by vl-convert).

No chart needs JavaScript or a CDN when the page is read; each one is
written next to the articles with a data table beside it in the page, so a
screen reader gets the same numbers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
from pathlib import Path

import altair as alt
import vl_convert

from .i18n import Lang
from .mdsafe import publishable


def _label(text) -> str:
    """Foreign text (model names, prompt classes) as a chart label: publishable, and short,
    since an SVG is published as it is (no page escaping reaches it)."""
    return publishable(text)[:200]

_WIDTH = 560


_LOCALES = {"en": "en-US", "de": "de-DE"}


class _Deferred:
    """A chart spec waiting to be rendered (see ``deferred``)."""

    def __init__(self, spec: str, locale: str):
        self.spec, self.locale = spec, locale


_pending: list[tuple[Path, _Deferred]] | None = None


def _render(spec: str, locale: str) -> str:
    # axis numbers in the page's locale too (1.000,5 in German)
    return vl_convert.vegalite_to_svg(spec, vl_version="5.20", format_locale=locale)


# vl-convert sizes the SVG with its own font metrics; a browser's sans-serif runs wider, so text
# at the right edge (a legend title such as "prompt class") was cut by the SVG's bounds.
_PADDING = {"left": 5, "top": 5, "right": 48, "bottom": 5}


def _svg(chart: alt.Chart, L: Lang):
    # not validated against the Vega-Lite schema here (0.3 s per new run at a year of runs, for specs
    # only this module builds): tests/test_report.py validates every chart a real run's articles draw
    spec = chart.to_dict(validate=False)
    spec.setdefault("padding", _PADDING)
    spec = json.dumps(spec)
    if _pending is not None:
        return _Deferred(spec, _LOCALES[L.code])
    return _render(spec, _LOCALES[L.code])


def _spec_mark(spec: str, locale: str) -> str:
    """The last line of a drawn chart: what it was drawn from (the spec, its locale, the renderer's
    version). A chart whose file ends with its mark is not drawn again: an older run's article that is
    rendered again because a later run confirmed one of its steps keeps its unchanged charts."""
    import hashlib

    h = hashlib.sha256(f"{vl_convert.__version__}\0{locale}\0{spec}".encode()).hexdigest()
    return f"<!-- cardproof chart {h} -->\n"


def _drawn(path: str, mark: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - len(mark)))
            return f.read().decode("ascii", "replace") == mark
    except OSError:
        return False


def _render_to(job: tuple[str, str, str, str]) -> str:
    path, spec, locale, mark = job
    Path(path).write_text(_render(spec, locale).rstrip("\n") + "\n" + mark)
    return path


#: fewer charts than this are drawn in this process: a pool's workers each import Altair and
#: vl-convert first (about 1.5 s here), while a chart takes about 75 ms. After one new run at a
#: year of nightly runs (about 20 charts) the pool cost 1.0-1.4 s more than drawing them here.
_POOL_JOBS = 40


@contextlib.contextmanager
def deferred(workers: int | None = None):
    """Collect every chart written inside the block and render them at its end,
    on all cores: rendering is most of the report step's time."""
    global _pending
    _pending = []
    try:
        yield
        jobs = [(str(p), d.spec, d.locale, mark) for p, d in _pending
                for mark in [_spec_mark(d.spec, d.locale)] if not _drawn(str(p), mark)]
    finally:
        _pending = None
    workers = workers or os.cpu_count() or 1
    if len(jobs) < _POOL_JOBS or workers < 2:
        for job in jobs:
            _render_to(job)
        return
    # spawn, not fork: the caller may have threads (samplers, servers, test
    # harnesses) whose locks a forked child would inherit held, and hang on
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        list(pool.map(_render_to, jobs, chunksize=max(1, len(jobs) // (workers * 4))))


def decode_rows(view: dict, L: Lang, reasoning: bool) -> list[dict]:
    rows = []
    for m in view["models"]:
        for cls in view["classes"]:
            c = m["cells"].get((cls, reasoning))
            if c and c["decode"]:
                d = c["decode"]
                # raw values: the page rounds each once, as the main table does
                rows.append({"model": _label(m["name"]), "class": _label(L.gettext(cls)), "median": d.median,
                             "low": d.low, "high": d.high, "n": d.n, "cell": c["id"],
                             "unstable": bool(c.get("unstable")),
                             "stability": L.gettext("unstable") if c.get("unstable") else L.gettext("stable")})
    return rows


def decode_domain(*row_lists: list[dict]) -> list[float] | None:
    """One x range for every decode chart of a run (reasoning off and on share it), from min low to max high."""
    values = [v for rows in row_lists for r in rows for v in (r["low"], r["high"], r["median"])
              if isinstance(v, (int, float)) and v == v and v not in (float("inf"), float("-inf"))]
    if not values:
        return None
    return [min(values), max(values)]


def log_scale(domain: list[float] | None) -> bool:
    """Values across more than one order of magnitude (all above zero) are read on a log scale."""
    return bool(domain) and domain[0] > 0 and domain[1] / domain[0] > 10


def decode_spec(rows: list[dict], L: Lang, title: str | None = None, domain: list[float] | None = None):
    """The decode chart as an Altair chart (see decode_chart)."""
    base = alt.Chart(alt.Data(values=rows))
    y = alt.Y("model:N", title=None, sort=None)
    # the class legend shows the whisker's coloured stroke; stable vs unstable has a legend of its own
    color = alt.Color("class:N", title=L.gettext("prompt class"), sort=None,
                      legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2))
    domain = domain or decode_domain(rows)
    log = log_scale(domain)
    # the same domain for reasoning off and on: the two charts can be read side by side
    scale = alt.Scale(type="log" if log else "linear", domain=domain, nice=not log, zero=False) if domain \
        else alt.Scale()
    axis_title = L.gettext("decode tok/s (median, min–max)") + (" · " + L.gettext("log scale") if log else "")
    whisker = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", title=axis_title, scale=scale), x2="high:Q", y=y,
        yOffset=alt.YOffset("class:N", sort=None), color=color)
    # an unstable cell's median is drawn as a hollow mark: it is shown, not stated as a finding
    dots = base.mark_point(size=60).encode(
        x=alt.X("median:Q", scale=scale), y=y, yOffset=alt.YOffset("class:N", sort=None), color=color,
        # hollow by fill opacity, not by a white fill: a fill value reaches the shape legend's
        # symbols too, which were drawn white on white with no outline
        fill=alt.Color("class:N", sort=None, legend=None),
        fillOpacity=alt.condition("datum.unstable", alt.value(0), alt.value(1)),
        shape=alt.Shape("stability:N", title=None, sort=None,
                        legend=alt.Legend(symbolStrokeColor="#555", symbolFillColor="#555")))
    height = max(80, 26 * len({r["model"] for r in rows}) * max(1, len({r["class"] for r in rows})))
    chart = (whisker + dots).properties(width=_WIDTH, height=height)
    if title:
        chart = chart.properties(title=_label(title))
    # a legend title cut to "Prompt-Klass" reads as a typo; the symbols' outline shows hollow vs filled
    return chart.configure_axis(labelLimit=240).configure_legend(titleLimit=240, labelLimit=240,
                                                                 symbolStrokeColor="#555")


def decode_chart(rows: list[dict], L: Lang, title: str | None = None, domain: list[float] | None = None) -> str:
    """Decode tok/s per model and prompt class: median as a dot, min–max as a whisker.

    ``domain`` is the x range shared with the run's other decode chart; past one
    order of magnitude the axis is logarithmic (and says so).
    """
    return _svg(decode_spec(rows, L, title, domain), L)


def reasoning_rows(view: dict, L: Lang) -> list[dict]:
    """On/off pairs that may be read as an effect (report.findings.reasoning_pairs); raw values,
    so the page rounds each figure once."""
    from .findings import reasoning_pairs

    rows = []
    for p in reasoning_pairs(view)[0]:
        if p["delta"] is None:
            continue
        rows.append({"model": _label(p["model"]), "class": _label(L.gettext(p["cls"])),
                     "off": p["off"]["decode"].median, "on": p["on"]["decode"].median, "delta": p["delta"],
                     "measurable": p["measurable"], "cell_off": p["off"]["id"], "cell_on": p["on"]["id"]})
    return rows


def reasoning_spec(rows: list[dict], L: Lang, title: str | None = None):
    """The reasoning chart as an Altair chart (see reasoning_chart)."""
    deltas = [r["delta"] for r in rows if isinstance(r.get("delta"), (int, float))]
    # on/off - 1 cannot fall below -100 %: the axis stops there instead of a "nice" -400 %
    low = max(-1.0, min([0.0, *deltas]))
    high = max([0.0, *deltas])
    chart = alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("delta:Q", title=L.gettext("decode change with reasoning on"), axis=alt.Axis(format="+%"),
                scale=alt.Scale(domain=[low, high if high > low else low + 0.1], nice=False, clamp=True)),
        y=alt.Y("model:N", title=None, sort=None),
        yOffset=alt.YOffset("class:N", sort=None),
        color=alt.Color("class:N", title=L.gettext("prompt class"), sort=None),
    ).properties(width=_WIDTH, height=max(80, 22 * len(rows)))
    if title:
        chart = chart.properties(title=_label(title))
    return chart


def reasoning_chart(rows: list[dict], L: Lang, title: str | None = None) -> str:
    """Change of the decode median when reasoning is switched on, per model and class."""
    return _svg(reasoning_spec(rows, L, title), L)


def write_svg(path: Path, svg) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(svg, _Deferred):
        _pending.append((path, svg))
    else:
        path.write_text(svg)
    return path


def deviation_chart(rows: list[dict], L: Lang) -> str:
    """Per-cell change of run B against run A; cells beyond their own spread drawn dark."""
    data = [{"cell": _label(f"{r['model']} · {L.gettext(r['prompt_class'])}" + (" · R" if r["reasoning"] else "")),
             "deviation": round(r["deviation"], 4), "beyond": bool(r["beyond_spread"])} for r in rows]
    chart = alt.Chart(alt.Data(values=data)).mark_bar().encode(
        x=alt.X("deviation:Q", title=L.gettext("change"), axis=alt.Axis(format="+%")),
        y=alt.Y("cell:N", title=None, sort=None),
        color=alt.Color("beyond:N", title=L.gettext("beyond spread"), scale=alt.Scale(range=["#9ecae1", "#08519c"])),
    ).properties(width=_WIDTH, height=max(80, 18 * len(data)))
    return _svg(chart, L)


def memory_rows(memory: dict, L: Lang) -> list[dict]:
    """Stack segments per model (GiB): weights, KV, compute per device, draft, projector, unexplained."""
    rows = []
    for r in memory.get("loads", []):
        if r.get("card_mib") is None:
            continue
        parts = [("weights", r.get("weights_mib")), ("KV cache", r.get("kv_mib"))]
        parts += [(f"compute {d}", v) for d, v in sorted((r.get("compute_by_device") or {}).items())]
        parts += [("draft/MTP", r.get("draft_mib")), ("projector", r.get("projector_mib")),
                  ("unexplained", r.get("unexplained_mib"))]
        for order, (item, mib) in enumerate(parts):
            if mib:
                rows.append({"model": _label(r["model"]), "item": _label(L.gettext(item)), "gib": round(mib / 1024, 3),
                             "order": order, "selfreport": round((r.get("selfreport_mib") or 0) / 1024, 3)})
    return rows


def memory_chart(rows: list[dict], L: Lang) -> str:
    """Memory from the card stacked by item, with the runtime's self-report as a black tick."""
    base = alt.Chart(alt.Data(values=rows))
    bars = base.mark_bar().encode(
        x=alt.X("sum(gib):Q", title=L.gettext("GiB on the card (stacked by item); tick: self-report")),
        y=alt.Y("model:N", title=None, sort=None),
        color=alt.Color("item:N", title=None, sort=None),
        order=alt.Order("order:Q"),
    )
    ticks = base.mark_tick(color="black", thickness=3, size=24).encode(
        x="max(selfreport):Q", y=alt.Y("model:N", sort=None))
    return _svg((bars + ticks).properties(width=_WIDTH, height=max(60, 40 * len({r["model"] for r in rows}))), L)
