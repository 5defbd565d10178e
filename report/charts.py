"""Charts as static SVG (Altair rendered offline by vl-convert).

No chart needs JavaScript or a CDN when the page is read; each one is
written next to the articles with a data table beside it in the page, so a
screen reader gets the same numbers.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import altair as alt
import vl_convert

from . import chart_draw

from cardproof.marks import N_

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


_pending: "_Drawer | None" = None


def _render(spec: str, locale: str) -> str:
    return chart_draw.render(spec, locale)


# vl-convert sizes the SVG with its own font metrics; a browser's sans-serif runs wider, so text
# at the right edge (a legend title such as "prompt class") was cut by the SVG's bounds.
_PADDING = {"left": 5, "top": 5, "right": 48, "bottom": 5}


#: a chart's accessible name: what it shows and its figures, rounded as the page rounds them
DESCRIPTION = N_("Chart: {lead}. {items}.")
PER_MODEL_AND_CLASS = N_("{what} per model and prompt class")
PER_CELL = N_("{what} per cell")
PER_MODEL = N_("{what} per model")
AGAINST = N_("{y} against {x}")
#: how many figures a description names: a screen reader reads the rest from the table below the chart
_DESCRIBED_MAX = 40


def describe(L: Lang, lead: str, items: list[str]) -> str:
    """A chart's description in ``L``'s language: ``lead`` (what it shows) and its figures."""
    shown = items[:_DESCRIBED_MAX] + (["…"] if len(items) > _DESCRIBED_MAX else [])
    return L.gettext(DESCRIPTION).format(lead=lead, items="; ".join(shown)).replace(". .", ".")


def _spec_text(chart: "alt.Chart | dict") -> str:
    # not validated against the Vega-Lite schema here (0.3 s per new run at a year of runs, for specs
    # only this module builds): tests/test_report.py validates every chart a real run's articles draw
    spec = json.loads(json.dumps(chart)) if isinstance(chart, dict) else chart.to_dict(validate=False)
    spec.setdefault("padding", _PADDING)
    # Vega writes the marks', axes' and legends' accessible labels itself, in English and from field
    # names ("X-axis titled …", "high: 125.033491114"): they are left out, and the chart is named by its
    # description in the page's language instead (chart_draw.accessible)
    config = spec.setdefault("config", {})
    config["aria"] = False
    config.setdefault("title", {})["aria"] = False
    return json.dumps(spec)


def _draw(spec: str, L: Lang):
    if _pending is not None:
        return _Deferred(spec, _LOCALES[L.code])
    return _render(spec, _LOCALES[L.code])


def _svg(chart: "alt.Chart | dict", L: Lang):
    return _draw(_spec_text(chart), L)


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


#: drawn charts by their mark (spec, locale, renderer), the most recent last: a later build in the same
#: process (the daemon's next one, a build from scratch beside an incremental one) writes a chart it
#: drew before without drawing it again; the text is what the chart's file held, mark included
_DRAWN: "collections.OrderedDict[str, str]" = collections.OrderedDict()
_DRAWN_MAX = 512
_DRAWN_LOCK = threading.Lock()


def _remember(mark: str, text: str) -> None:
    if not text.endswith(mark):
        return  # a file another process wrote since: not this chart
    with _DRAWN_LOCK:
        _DRAWN[mark] = text
        _DRAWN.move_to_end(mark)
        while len(_DRAWN) > _DRAWN_MAX:
            _DRAWN.popitem(last=False)


def _recall(mark: str) -> str | None:
    with _DRAWN_LOCK:
        text = _DRAWN.get(mark)
        if text is not None:
            _DRAWN.move_to_end(mark)
        return text


def _render_to(job: tuple[str, str, str, str]) -> str:
    path, spec, locale, mark = job  # as chart_draw.render_to, through this module's ``_render``
    Path(path).write_text(_render(spec, locale).rstrip("\n") + "\n" + mark)
    return path


class _Drawer:
    """The charts of a ``deferred`` block, drawn by worker processes while the block goes on.

    A worker (``python -m cardproof.report.chart_draw``) imports vl-convert alone and starts with the
    first chart beyond the :attr:`LOCAL` ones this process draws itself: on a first build of many runs
    the charts are drawn on other cores while the pages are written. More workers start, up to
    ``workers``, while many charts wait. A chart whose file already ends with its mark is not drawn again.
    A worker is a plain child process, not ``multiprocessing``: the caller's main script is never
    imported again. Where a worker cannot start, fails a chart or dies, what it did not draw is drawn
    in this process at the block's end (so a real drawing error is raised here, as with one core).
    """

    #: charts waiting per worker before another one starts
    BACKLOG = 16
    #: the first charts of a block are drawn here, at its end: a worker takes about half a second to be
    #: ready (Python, then vl-convert's engine), a chart drawn here about 30 ms once this process's engine
    #: runs; a new run's article and its trend pages (a daemon's nightly build) stay under this
    LOCAL = 12

    def __init__(self, workers: int):
        self.workers = workers
        self.jobs: dict[str, tuple] = {}  # path -> its latest job
        self.procs: list[dict] = []  # {"proc", "queue", "threads", "done": [result lines], "sent": count}
        self.owner: dict[str, dict] = {}  # path -> the worker it went to (a path asked for twice: the same one)
        self.local: list[str] = []  # paths drawn here, at the end, in order

    def add(self, path: Path, d: _Deferred) -> None:
        key = str(path)
        job = (key, d.spec, d.locale, _spec_mark(d.spec, d.locale))
        self.jobs[key] = job
        if key in self.local or (key not in self.owner and _drawn(key, job[3])):
            return  # drawn here at the end; or its file is this chart already
        known = _recall(job[3]) if key not in self.owner else None
        if known is not None:  # drawn before in this process: its text, not a drawing
            Path(key).write_text(known)
            return
        worker = self.owner.get(key)
        if worker is None and len(self.local) < self.LOCAL:
            self.local.append(key)
            return
        worker = worker or self._worker()
        if worker is not None:
            worker["queue"].put(json.dumps(job) + "\n")  # written by its writer: a spec can outgrow the pipe
            worker["sent"] += 1
            self.owner[key] = worker  # a path asked for again goes to the same worker: the last one wins
            return
        self.local.append(key)

    def _worker(self) -> dict | None:
        live = self.procs

        def waiting(w: dict) -> int:
            return w["sent"] - len(w["done"])

        if self.workers >= 2 and len(self.procs) < self.workers \
                and (not live or min(map(waiting, live)) >= self.BACKLOG):
            try:
                proc = subprocess.Popen([sys.executable, "-m", "cardproof.report.chart_draw"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, encoding="utf-8")
            except OSError:
                self.workers = 1
            else:
                worker = {"proc": proc, "done": [], "sent": 0, "queue": queue.SimpleQueue()}
                worker["threads"] = [threading.Thread(target=f, args=(worker,), daemon=True)
                                     for f in (self._write, self._read)]
                for t in worker["threads"]:
                    t.start()
                self.procs.append(worker)
                return worker
        return min(live, key=waiting) if live else None

    @staticmethod
    def _write(worker: dict) -> None:
        """The worker's jobs, in order, until ``None``; then its input ends (and with it the worker)."""
        stdin = worker["proc"].stdin
        try:
            while (line := worker["queue"].get()) is not None:
                stdin.write(line)
                stdin.flush()
        except (OSError, ValueError):
            pass  # the worker died: what it did not draw is drawn at the block's end
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    @staticmethod
    def _read(worker: dict) -> None:
        for line in worker["proc"].stdout:  # drained as it comes: a full pipe would stop the worker
            worker["done"].append(line)

    def finish(self) -> None:
        for worker in self.procs:
            worker["queue"].put(None)
        for worker in self.procs:
            for t in worker["threads"]:
                t.join()
            worker["proc"].wait()
        self.procs = []
        # what no worker drew (none could start, one failed a chart or died) is drawn here, in the order
        # asked for; a chart a worker drew ends with its mark
        for key, job in self.jobs.items():
            if not _drawn(key, job[3]):
                _render_to(job)
            if key in self.owner or key in self.local:  # drawn in this block: kept for a later one
                try:
                    _remember(job[3], Path(key).read_text())
                except OSError:
                    pass

    def close(self) -> None:
        """The block failed: its workers stop where they are."""
        for worker in self.procs:
            worker["queue"].put(None)
            try:
                worker["proc"].kill()
                worker["proc"].wait()
            except OSError:
                pass
        self.procs = []


@contextlib.contextmanager
def deferred(workers: int | None = None):
    """Collect every chart written inside the block; worker processes draw them while the block goes
    on, on the other cores, and the block's end waits for them (``_Drawer``). One core: drawn here at
    the end."""
    global _pending
    drawer = _Drawer(workers or os.cpu_count() or 1)
    _pending = drawer
    try:
        yield
        _pending = None
        drawer.finish()
    finally:
        _pending = None
        drawer.close()


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


def log_ticks(domain: list[float]) -> tuple[list[float], list[float]]:
    """A log axis's domain widened to the 1-2-5 values around it, and a tick at each 1-2-5 value in it:
    a figure near 1,500 sits between the ticks 1,000 and 2,000 rather than past the last label."""
    lo, hi = domain
    steps = [m * 10.0 ** k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5)]
    start = max([v for v in steps if v <= lo * (1 + 1e-9)], default=lo)
    end = min([v for v in steps if v >= hi * (1 - 1e-9)], default=hi)
    return [start, end], [v for v in steps if start <= v <= end]


#: the Vega-Lite schema the specs below name (the one Altair's objects wrote before they were built as dicts)
SCHEMA = alt.SCHEMA_URL


def _nominal(field: str, **extra) -> dict:
    return {"field": field, **extra, "type": "nominal"}


def decode_spec(rows: list[dict], L: Lang, title: str | None = None, domain: list[float] | None = None,
                axis_title: str | None = None) -> dict:
    """The decode chart's Vega-Lite spec (see decode_chart); ``axis_title``: another figure drawn alike.

    Built as a plain dict: Altair's objects copy themselves at every chained call, which made this
    chart 60 % of an article's build time; tests/test_report.py validates every spec a real run draws.
    """
    y = _nominal("model", sort=None, title=None)
    y_offset = _nominal("class", sort=None)
    # the class legend shows the whisker's coloured stroke; stable vs unstable has a legend of its own
    color = _nominal("class", legend={"symbolStrokeWidth": 2, "symbolType": "stroke"}, sort=None,
                     title=L.gettext("prompt class"))
    domain = domain or decode_domain(rows)
    log = log_scale(domain)
    axis: dict = {}
    if log:  # ticks at 1-2-5 values over a domain widened to them: Vega's own thin out past a decade
        domain, ticks = log_ticks(domain)
        axis = {"values": ticks}
    # the same domain for reasoning off and on: the two charts can be read side by side
    scale = {"domain": domain, "nice": not log, "type": "log" if log else "linear", "zero": False} if domain \
        else None
    axis_title = (axis_title or L.gettext("decode tok/s (median, min–max)")) + (
        " · " + L.gettext("log scale") if log else "")

    def x(field: str, **extra) -> dict:
        return {**({"axis": axis} if extra else {}), "field": field, **({"scale": scale} if scale else {}), **extra,
                "type": "quantitative"}

    whisker = {"mark": {"type": "rule", "strokeWidth": 2},
               "encoding": {"color": color, "x": x("low", title=axis_title), "x2": {"field": "high"}, "y": y,
                            "yOffset": y_offset}}
    # an unstable cell's median is drawn as a hollow mark: it is shown, not stated as a finding
    dots = {"mark": {"type": "point", "size": 60},
            "encoding": {"color": color,
                         # hollow by fill opacity, not by a white fill: a fill value reaches the shape legend's
                         # symbols too, which were drawn white on white with no outline
                         "fill": _nominal("class", legend=None, sort=None),
                         "fillOpacity": {"condition": {"test": "datum.unstable", "value": 0}, "value": 1},
                         "shape": _nominal("stability", legend={"symbolFillColor": "#555",
                                                                "symbolStrokeColor": "#555"}, sort=None, title=None),
                         "x": x("median"), "y": y, "yOffset": y_offset}}
    height = max(80, 26 * len({r["model"] for r in rows}) * max(1, len({r["class"] for r in rows})))
    items = [f"{r['model']} · {r['class']}: {L.num(r['median'])} ({L.num(r['low'])}–{L.num(r['high'])})"
             + (f", {r['stability']}" if r.get("unstable") else "") for r in rows]
    lead = L.gettext(PER_MODEL_AND_CLASS).format(what=axis_title)
    # a legend title cut to "Prompt-Klass" reads as a typo; the symbols' outline shows hollow vs filled
    spec = {"config": {"view": {"continuousWidth": 300, "continuousHeight": 300}, "axis": {"labelLimit": 240},
                       "legend": {"labelLimit": 240, "symbolStrokeColor": "#555", "titleLimit": 240}},
            "layer": [whisker, dots], "data": {"values": rows},
            "description": describe(L, f"{_label(title)}: {lead}" if title else lead, items), "height": height}
    if title:
        spec["title"] = _label(title)
    return {**spec, "width": _WIDTH, "$schema": SCHEMA}


def decode_chart(rows: list[dict], L: Lang, title: str | None = None, domain: list[float] | None = None,
                 axis_title: str | None = None) -> str:
    """Decode tok/s per model and prompt class: median as a dot, min–max as a whisker.

    ``domain`` is the x range shared with the run's other decode chart; past one
    order of magnitude the axis is logarithmic (and says so).
    """
    return _svg(decode_spec(rows, L, title, domain, axis_title), L)


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
    ).properties(width=_WIDTH, height=max(80, 22 * len(rows)), description=describe(
        L, L.gettext(PER_MODEL_AND_CLASS).format(what=L.gettext("decode change with reasoning on")),
        [f"{r['model']} · {r['class']}: {L.signed_pct(r['delta'])}" for r in rows]))
    if title:
        chart = chart.properties(title=_label(title))
    return chart


def reasoning_chart(rows: list[dict], L: Lang, title: str | None = None) -> str:
    """Change of the decode median when reasoning is switched on, per model and class."""
    return _svg(reasoning_spec(rows, L, title), L)


def write_svg(path: Path, svg) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(svg, _Deferred):
        _pending.add(path, svg)
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
    ).properties(width=_WIDTH, height=max(80, 18 * len(data)), description=describe(
        L, L.gettext(PER_CELL).format(what=L.gettext("change")),
        [f"{d['cell']}: {L.signed_pct(d['deviation'])}" + (f", {L.gettext('beyond spread')}" if d["beyond"] else "")
         for d in data]))
    return _svg(chart, L)


def memory_rows(memory: dict, L: Lang) -> list[dict]:
    """Stack segments per model (GiB): weights, KV, compute per device, draft, projector, unexplained."""
    rows = []
    for r in memory.get("loads", []):
        if r.get("card_mib") is None:
            continue
        _ = L.gettext
        parts = [(_("weights"), r.get("weights_mib")), (_("KV cache"), r.get("kv_mib"))]
        parts += [(_("compute {device}").format(device=d), v)
                  for d, v in sorted((r.get("compute_by_device") or {}).items())]
        parts += [(_("draft/MTP"), r.get("draft_mib")), (_("projector"), r.get("projector_mib")),
                  (_("unexplained"), r.get("unexplained_mib"))]
        for order, (item, mib) in enumerate(parts):
            if mib:
                rows.append({"model": _label(r["model"]), "item": _label(item), "gib": round(mib / 1024, 3),
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
    items = [f"{r['model']} · {r['item']}: {L.num(r['gib'], 2)} GiB" for r in rows]
    items += [f"{model} · {L.gettext('self-report')}: {L.num(gib, 2)} GiB"
              for model, gib in dict((r["model"], r["selfreport"]) for r in rows).items() if gib]
    lead = L.gettext(PER_MODEL).format(what=L.gettext("GiB on the card (stacked by item); tick: self-report"))
    return _svg((bars + ticks).properties(width=_WIDTH, height=max(60, 40 * len({r["model"] for r in rows})),
                                          description=describe(L, lead, items)), L)


def _significant(L: Lang, value, digits: int = 2) -> str:
    """``value`` with ``digits`` significant digits (0,0012 rather than 0,00): for figures far below one."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value == 0:
        return L.num(value, 0) if value == 0 else L.num(value)
    return L.num(value, max(0, digits - 1 - math.floor(math.log10(abs(value)))))


def quality_chart(rows: list[dict], L: Lang, title: str | None = None) -> str:
    """Each ladder member and variant: decode against KL divergence from the base, memory as the point's
    size; the points no other beats on both drawn dark (the Pareto front)."""
    front, beaten = L.gettext("on the front"), L.gettext("beaten on both")
    data = [{"model": _label(r["model"]), "kld": r["kld"], "decode": r["decode"], "mib": round(r["mib"], 1),
             "front": front if r["front"] else beaten} for r in rows]
    # room on the right for the names beside the points
    high = max([r["kld"] for r in rows if isinstance(r.get("kld"), (int, float))] + [0.0]) * 1.35 or 1.0
    base = alt.Chart(alt.Data(values=data))
    points = base.mark_circle(opacity=0.85).encode(
        x=alt.X("kld:Q", title=L.gettext("mean KL divergence from the base (lower: closer answers)"),
                scale=alt.Scale(domain=[0, high], nice=False)),
        y=alt.Y("decode:Q", title=L.gettext("decode tok/s (median)"), scale=alt.Scale(zero=False)),
        size=alt.Size("mib:Q", title=L.gettext("memory MiB"), scale=alt.Scale(range=[60, 600])),
        color=alt.Color("front:N", title=None, scale=alt.Scale(domain=[front, beaten], range=["#08519c", "#9ecae1"])),
    )
    labels = base.mark_text(align="left", dx=10, dy=-8, fontSize=11).encode(x="kld:Q", y="decode:Q", text="model:N")
    lead = L.gettext(AGAINST).format(y=L.gettext("decode tok/s (median)"),
                                      x=L.gettext("mean KL divergence from the base (lower: closer answers)"))
    # a KL divergence lives in the thousandths: two significant digits, not two decimals
    items = [f"{d['model']}: KL {_significant(L, d['kld'])}, {L.num(d['decode'])} {L.gettext('tok/s')}, "
             f"{L.num(d['mib'], 0)} MiB, {d['front']}" for d in data]
    chart = (points + labels).properties(width=_WIDTH, height=260, description=describe(
        L, f"{_label(title)}: {lead}" if title else lead, items)).configure_legend(orient="bottom")
    if title:
        chart = chart.properties(title=_label(title))
    return _svg(chart, L)
