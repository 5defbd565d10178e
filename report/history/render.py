"""Trend pages: one per campaign × model in both languages, with an index, under ``site/trends/``.

Each page shows every metric over the runs' dates (a chart per metric, a
line per cell), the steps found with their interval and the conditions
that changed, and a table per cell whose every figure links to its run.
A page whose figures, steps and conditions are unchanged since the last
build (a fingerprint file beside the pages) is neither rendered nor charted
again; pages of series no longer in the store go away.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import defaultdict
from pathlib import Path

from cardproof.marks import N_
from .. import charts, csvsafe
from ..i18n import CATALOGUE, LANGUAGES, Lang
from ..mdsafe import MD, publishable, publishing, translator
from ..site import write_if_changed as _write_if_changed
from . import chart
from .chart import LOAD_STREAMS
from .conditions import label
from .llama_bench import bench_series
from .numbers import dates, formatter
from .tables import row_maker
from ...daemon.load.stats import rate_digits
from .series import METRICS, OK, build_series, slug

FOLDER = "trends"
_PRINTS = ".trends.json"
#: rows of a cell's table beyond those that matter (steps, changes, unusable runs): the latest runs
TABLE_RUNS = 60
METRIC_NAMES = {"decode_tps": "decode", "prefill_tps": "prefill", "ttft_ms": "TTFT", "load_seconds": "load time",
                "aggregate_tps": "aggregate tok/s", "ttft_p90_ms": N_("TTFT p90")}
_FILE_KEYS = {"decode_tps": "decode", "prefill_tps": "prefill", "ttft_ms": "ttft", "load_seconds": "load",
              "aggregate_tps": "aggregate", "ttft_p90_ms": "ttft-p90"}
METRIC_AXES = {"decode_tps": "decode tok/s (median, min–max)", "prefill_tps": "prefill tok/s (median, min–max)",
               "ttft_ms": N_("TTFT ms (median, min–max)"), "load_seconds": N_("load time s (median, min–max)"),
               "aggregate_tps": N_("aggregate tok/s (one figure per run)"),
               "ttft_p90_ms": N_("TTFT p90 ms (one figure per run)")}


def _suffix(lang: str) -> str:
    return "" if lang == "en" else f".{lang}"


def _run_link(p: dict, L: Lang) -> MD:
    build = MD(" ({} {})").format(L.gettext("build"), p["server_build"]) if p.get("server_build") else MD("")
    return MD("[{} {}](../runs/run-{}.md){}").format(L.gettext("run"), p["run_id"], p["run_id"], build)


def cell_name(s: dict, L: Lang) -> MD:
    """'short · reasoning off', 'load: 4 streams · short', 'depth 4,096 tokens · short' in ``L``."""
    kind = s.get("kind", "measure")
    if kind == "load":
        return MD("{} · {}").format(MD(L.plural(LOAD_STREAMS, s["streams"])).format(n=L.num(s["streams"], 0)),
                                    L.gettext(s["prompt_class"]))
    if kind == "depth":
        return MD("{} · {}").format(MD(L.gettext("depth {tokens} tokens")).format(tokens=L.num(s["depth_tokens"], 0)),
                                    L.gettext(s["prompt_class"]))
    if kind == "rate":
        rate = s["rate_rps"]
        return MD("{} · {}").format(MD(L.gettext("{rate} requests/s")).format(rate=L.num(rate, rate_digits(rate))),
                                    L.gettext(s["prompt_class"]))
    return MD("{} · {}").format(L.gettext(s["prompt_class"]),
                                (L.gettext("reasoning on") if s["reasoning"] else L.gettext("reasoning off")))


def cell_anchor(s: dict) -> str:
    """The page anchor of a series' table: distinct per prompt class and reasoning, streams, depth."""
    kind = s.get("kind", "measure")
    if kind == "load":
        return f"cell-load-{int(s['streams'])}-{slug(s['prompt_class'])}"
    if kind == "depth":
        return f"cell-depth-{int(s['depth_tokens'])}-{slug(s['prompt_class'])}"
    if kind == "rate":  # 0.5 -> "0p5": a dot would end the anchor in some readers' eyes
        rate = f"{s['rate_rps']:.{rate_digits(s['rate_rps'])}f}".replace(".", "p")
        return f"cell-rate-{rate}-{slug(s['prompt_class'])}"
    return f"cell-{s['prompt_class']}-{'on' if s['reasoning'] else 'off'}"


def step_sentence(series: dict, step: dict, L: Lang) -> MD:
    """'decode of X (short · reasoning off) fell 12 % (9–15 %) between run 41 (build b7342) and run 42 …'."""
    def _(msg: str) -> MD:  # our own messages (literals below): trusted Markdown in the page's language
        return MD(L.gettext(msg))

    lo, hi = sorted((abs(step["low"]), abs(step["high"])))
    if step["metric"] == "load_seconds":  # a load belongs to the model, not to one of its cells
        msg = (N_("{metric} of {model} rose {size} ({low}–{high}) between {before} and {after}, "
                  "and stayed there for {stayed}.") if step["change"] > 0 else
               N_("{metric} of {model} fell {size} ({low}–{high}) between {before} and {after}, "
                  "and stayed there for {stayed}."))
    else:
        msg = (N_("{metric} of {model} ({cell}) rose {size} ({low}–{high}) between {before} and {after}, "
                  "and stayed there for {stayed}.") if step["change"] > 0 else
               N_("{metric} of {model} ({cell}) fell {size} ({low}–{high}) between {before} and {after}, "
                  "and stayed there for {stayed}."))
    text = _(msg).format(
        metric=L.gettext(METRIC_NAMES[step["metric"]]), model=series["model"], cell=cell_name(series, L),
        size=L.pct(abs(step["change"]), 1), low=L.num(lo * 100, 1), high=L.pct(hi, 1),
        before=_run_link(step["before"], L), after=_run_link(step["after"], L),
        stayed=L.ngettext("%(num)s run", "%(num)s runs", step["stayed"]))
    if step["changes"]:
        text += MD(" ") + _("Changed between them:") + MD(" ") + MD("; ").join(
            MD("{} {} → {}").format(label(d, L), d.before, d.after) for d in step["changes"]) + MD(".")
    else:
        text += MD(" ") + _("No stored condition changed between them.")
    if step["skipped"]:
        text += MD(" ") + _("Runs in between that cannot carry a step:") + MD(" ") + MD(", ").join(
            MD("[{}](../runs/run-{}.md)").format(r, r) for r in step["skipped"]) + MD(".")
    return text


def assign_pages(series: list[dict]) -> dict[str, list[dict]]:
    """Page name -> its series; sets each series' final ``page`` (two names that slug alike get distinct pages).

    The run articles' leads link these names, so both read the same assignment.
    """
    pages: dict[str, list[dict]] = defaultdict(list)
    for s in series:
        pages[s["page"]].append(s)
    # two campaign/model names that slug alike get distinct pages
    out = {}
    for name, group in pages.items():
        by_key: dict[tuple, list[dict]] = defaultdict(list)
        for s in group:
            by_key[(s["campaign"], s["model"])].append(s)
        for i, (key, ss) in enumerate(sorted(by_key.items())):
            page = name if i == 0 else f"{name}-{i + 1}"
            for s in ss:
                s["page"] = page
            out[page] = ss
    return out


def _code_fingerprint() -> str:
    """This package, the templates and the catalogue: a change re-renders every chart (and, csvsafe.py, every
    CSV line a page file keeps)."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for p in sorted([*here.glob("*.py"), *here.parent.glob("templates/trend*.j2"),
                     *here.parent.glob("locale/*/LC_MESSAGES/*.po"), here.parent / "charts.py",
                     here.parent / "csvsafe.py"]):
        h.update(p.read_bytes())
    return h.hexdigest()


def series_print(page_series: list[dict]) -> str:
    """Everything a page shows of its series (points, conditions that changed, steps), as a key."""
    h = hashlib.sha256()

    def point(p):
        if p.get("_print"):  # the run's fingerprint stands for its values and spreads (report/fingerprints.py)
            return [p["run_id"], p["_print"], p["started_at"], p["cell_id"], p["state"], p["changes"],
                    p.get("aside"), p.get("anchor")]
        return [p["run_id"], p["started_at"], p["server_build"], p["cell_id"], p["state"], p["changes"], p.get("aside"),
                [(m, sp and (sp.median, sp.low, sp.high, sp.n)) for m, sp in p["spread"].items()], p.get("anchor")]

    for s in page_series:
        h.update(json.dumps([s["campaign"], s["model"], s["prompt_class"], s["reasoning"], s["min_effect"],
                             s.get("kind"), s.get("streams"), s.get("depth_tokens"), s.get("rate_rps"),
                             [point(p) for p in s["points"]],
                             [[st["metric"], st["before"]["run_id"], st["after"]["run_id"], st["ratio"], st["low"],
                               st["high"], st["stayed"], st["changes"], st["skipped"]] for st in s["steps"]]],
                            default=str).encode())
    return h.hexdigest()


def page_print(of_series: str, bench: dict, code: str) -> str:
    """A page's key: its series' (``series_print``), its model's llama-bench points and the code that shows them."""
    h = hashlib.sha256(code.encode())
    h.update(of_series.encode())
    h.update(json.dumps(bench, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _table_points(s: dict) -> dict:
    """The rows a cell's table shows: the latest ``TABLE_RUNS`` points and every point that carries a step,
    a changed condition or a state that cannot carry a step; the rest are counted (all are in the data file).

    A year of nightly runs would otherwise print thousands of rows per cell on every page.
    """
    points = s["points"]
    keep = {p["run_id"] for p in points[-TABLE_RUNS:]}
    keep |= {p["run_id"] for p in points if p["changes"] or p["state"] != OK}
    keep |= {st[side]["run_id"] for st in s["steps"] for side in ("before", "after")}
    shown = [p for p in points if p["run_id"] in keep]
    return {"points": shown, "left_out": len(points) - len(shown)}


def write_data_file(path: Path, page_series: list[dict]) -> None:
    """Every point of a page as CSV (language-neutral): what the tables leave out is here."""
    shown: dict = {}

    def public(value) -> str:  # a campaign, model and build repeat on every row: masked once each
        if value not in shown:
            shown[value] = publishable(value)
        return shown[value]

    line = io.StringIO()
    w = csvsafe.writer(line)  # names from campaigns and servers: no cell a spreadsheet would run
    w.writerow(["campaign", "model", "prompt_class", "reasoning", "run", "started_at", "server_build", "state",
                *[f"{m}_{part}" for m in METRICS for part in ("median", "low", "high", "n")],
                "cell_kind", "streams", "depth_tokens", "rate_rps"])
    lines = [line.getvalue()]
    for s in page_series:
        for p in s["points"]:
            # a point of a run that did not change keeps its line from the last build (report/history/pages.py; the
            # series it belongs to, whose fields the line repeats, is its own)
            kept = p.get("_csv")
            if type(kept) is tuple and len(kept) == 2 and kept[0] == p["state"] and type(kept[1]) is str:
                lines.append(kept[1])
                continue
            figures = []
            for m in METRICS:
                sp = p["spread"].get(m)
                figures += [sp.median, sp.low, sp.high, sp.n] if sp else ["", "", "", ""]
            line.seek(0)
            line.truncate()
            w.writerow([public(s["campaign"]), public(s["model"]), public(s["prompt_class"]),
                        int(bool(s["reasoning"])), p["run_id"], p["started_at"] or "",
                        public(p["server_build"] or ""), p["state"], *figures,
                        s.get("kind", "measure"), s.get("streams") or "", s.get("depth_tokens") or "",
                        "" if s.get("rate_rps") is None else s["rate_rps"]])
            text = line.getvalue()
            p["_csv"] = (p["state"], text)
            lines.append(text)
    with path.open("w", newline="", encoding="utf-8") as f:
        f.write("".join(lines))


def _page_view(page_series: list[dict], L: Lang) -> dict:
    first = page_series[0]
    points = [p for s in page_series for p in s["points"]]
    runs = sorted({p["run_id"] for p in points})
    dates = sorted(p["started_at"] for p in points if p["started_at"])
    changes: dict[int, dict] = {}
    for s in page_series:
        for p in s["points"]:
            # what cannot move a figure (a port, a file's place) is listed too, in small print
            if (p["changes"] or p.get("aside")) and p["run_id"] not in changes:
                changes[p["run_id"]] = {"point": p, "changes": p["changes"], "aside": p.get("aside") or []}
    return {
        "campaign": first["campaign"], "model": first["model"], "page": first["page"],
        "n_runs": len(runs), "first": dates[0] if dates else None, "last": dates[-1] if dates else None,
        "min_effect": max(s["min_effect"] for s in page_series),
        "steps": [{"text": step_sentence(s, st, L), "regression": st["regression"]}
                  for s in page_series for st in s["steps"]],
        "changes": [changes[r] for r in sorted(changes, key=lambda r: (changes[r]["point"]["started_at"] or "", r))],
        "not_usable": [p for p in points if p["state"] != OK],
        "bench": [],
        "cells": [{"name": cell_name(s, L), "anchor": cell_anchor(s), "metrics": s.get("metrics", list(METRICS)),
                   **_table_points(s)} for s in page_series],
        "data_file": f"{first['page']}.csv",
    }


def _env():
    """The report's one Jinja environment (the pages layer's, report/render.py)."""
    from ..render import environment

    return environment()


def trend_series(db) -> list[dict]:
    """Every series with its steps and final page names (the report build makes them one page at a time
    instead, report/history/pages.py)."""
    series = build_series(db)
    assign_pages(series)
    return series


def write_trends(db, project: Path, *, show_addresses: bool = False, series: list[dict] | None = None) -> list[Path]:
    """Every trend page and the trends index, both languages; returns the files written.

    ``series``: :func:`trend_series` of the store where the caller has it already. (The report build
    renders the pages one at a time as it makes their series, report/history/pages.py.)
    """
    trends = Trends(project, show_addresses=show_addresses)
    if series is None:
        series = trend_series(db)
    pages = assign_pages(series)
    bench = bench_series(db, sorted({s["model"] for s in series}))
    for name, page_series in sorted(pages.items()):
        page_bench = bench.get(page_series[0]["model"], {})
        key = page_print(series_print(page_series), page_bench, trends.code)
        if not trends.fresh(name, key):
            trends.render(name, page_series, page_bench, key)
    return trends.finish()


class Trends:
    """The trend pages of one build, rendered one at a time (:meth:`render`), then the index (:meth:`finish`).

    A page whose key (``page_print``) is the last build's and whose files and index line are there is
    not rendered again (:meth:`fresh`): :meth:`keep` names it, and the index keeps its line.
    """

    def __init__(self, project: Path, *, show_addresses: bool = False):
        self.out_dir = Path(project) / "site" / FOLDER
        self.img_dir = self.out_dir / "img"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.show_addresses = show_addresses
        try:
            old = json.loads((self.out_dir / _PRINTS).read_text())
        except (OSError, ValueError):
            old = {}
        self.old = old if isinstance(old, dict) else {}
        try:
            old_index = json.loads((self.out_dir / _INDEX).read_text())
        except (OSError, ValueError):
            old_index = {}
        self.old_index = old_index if isinstance(old_index, dict) else {}
        self.code = _code_fingerprint() + ("+addresses" if show_addresses else "")
        self.prints: dict[str, str] = {}
        self.written: list[Path] = []
        self.index: dict[str, dict] = {lang: {} for lang in LANGUAGES}  # page -> its line on the index

    def _files(self, name: str) -> list[Path]:
        return [self.out_dir / f"{name}{_suffix(lang)}.md" for lang in LANGUAGES]

    def _kept_line(self, lang: str, name: str, key: str) -> dict | None:
        kept = self.old_index.get(lang, {}).get(name) if isinstance(self.old_index.get(lang), dict) else None
        return kept if isinstance(kept, dict) and kept.get("print") == key and isinstance(kept.get("steps"), list) \
            else None

    def fresh(self, name: str, key: str) -> bool:
        """Whether the page with ``key`` is as the last build left it (then it is kept, not rendered)."""
        if self.old.get(name) == key and all(f.exists() for f in self._files(name)) \
                and all(self._kept_line(lang, name, key) for lang in LANGUAGES):
            self.keep(name, key)
            return True
        return False

    def keep(self, name: str, key: str) -> None:
        self.prints[name] = key
        for lang in LANGUAGES:
            self.index[lang][name] = self._kept_line(lang, name, key)

    def render(self, name: str, page_series: list[dict], page_bench: dict, key: str) -> None:
        """The page ``name`` (its Markdown in every language, its charts and data file)."""
        out_dir, img_dir, show_addresses = self.out_dir, self.img_dir, self.show_addresses
        self.prints[name] = key
        with publishing(show_addresses=show_addresses):
            write_data_file(out_dir / f"{name}.csv", page_series)
        changes = chart.change_rows(page_series)  # the dashed rules: the same in every chart of the page
        langs = [Lang(lang) for lang in LANGUAGES]
        charts_out: dict[str, list] = {lang: [] for lang in LANGUAGES}
        names = [chart.names(page_series, L) for L in langs]
        for metric in METRICS:
            rows = chart.trend_rows(page_series, metric) + chart.bench_rows(page_bench.get(metric, []))
            if not rows:
                continue
            img_dir.mkdir(parents=True, exist_ok=True)
            drawn = chart.trend_charts(rows, changes, [
                chart.labels(L, f"{L.gettext(METRIC_NAMES[metric])} · {page_series[0]['model']}",
                             L.gettext(METRIC_AXES[metric]), n) for L, n in zip(langs, names)])
            for L, text in zip(langs, drawn):
                svg = img_dir / f"{name}-{_FILE_KEYS[metric]}-{L.code}.svg"
                charts.write_svg(svg, text)
                charts_out[L.code].append({"metric": metric, "file": f"img/{svg.name}",
                                           "alt": L.gettext(METRIC_AXES[metric])})
        for L, path in zip(langs, self._files(name)):
            lang = L.code
            view = _page_view(page_series, L)
            self.index[lang][name] = _index_entry(view, key)
            view["bench"] = sorted((p for points in page_bench.values() for p in points),
                                   key=lambda p: (str(p["test"]), str(p["date"] or ""), p["id"]))
            with publishing(show_addresses=show_addresses):
                _ = translator(L.gettext, CATALOGUE)
                text = _env().get_template("trend.md.j2").render(
                    _=_, L=L, page=view, charts=charts_out[lang], metric_names=METRIC_NAMES, metrics=list(METRICS),
                    num=formatter(L), when=dates(L), row=row_maker(L, _))
            if _write_if_changed(path, text):
                self.written.append(path)

    def finish(self) -> list[Path]:
        """The trends index in every language; pages no longer named go; returns every file written."""
        out_dir = self.out_dir
        for lang in LANGUAGES:
            L = Lang(lang)
            views = [{**self.index[lang][name], "steps": [{"text": MD(t)} for t in self.index[lang][name]["steps"]]}
                     for name in sorted(self.prints)]
            with publishing(show_addresses=self.show_addresses):
                text = _env().get_template("trend_index.md.j2").render(_=translator(L.gettext, CATALOGUE), L=L,
                                                                        pages=views)
            path = out_dir / f"index{_suffix(lang)}.md"
            if _write_if_changed(path, text):
                self.written.append(path)
        _remove_stale(out_dir, set(self.prints))
        (out_dir / _PRINTS).write_text(json.dumps(self.prints, indent=1, sort_keys=True))
        try:
            (out_dir / _INDEX).write_text(json.dumps(self.index, sort_keys=True))
        except OSError:
            pass  # only a shortcut for the next build
        return self.written


#: beside the trend pages: each page's line on the trends index, by page fingerprint and language. Its
#: step sentences are the pages' own Markdown, as trusted as the pages beside it.
_INDEX = ".trend-index.json"


def _index_entry(view: dict, page_print: str) -> dict:
    """What the trends index shows of a page (``_page_view``), as JSON."""
    return {"print": page_print, "model": view["model"], "campaign": view["campaign"], "page": view["page"],
            "n_runs": view["n_runs"], "steps": [str(st["text"]) for st in view["steps"]]}


def _remove_stale(out_dir: Path, names: set[str]) -> None:
    for f in [*out_dir.glob("trend-*.md"), *out_dir.glob("trend-*.csv")]:
        if f.name.split(".")[0] not in names:
            f.unlink()
    for f in (out_dir / "img").glob("trend-*.svg") if (out_dir / "img").is_dir() else []:
        if not any(f.stem.startswith(n + "-") and f.stem[len(n) + 1:].rsplit("-", 1)[0] in _FILE_KEYS.values() for n in names):
            f.unlink()


def runs_of_steps(series: list[dict]) -> dict[int, list[dict]]:
    """Run id -> the steps it starts (the run after the step): what its article's lead may say."""
    out: dict[int, list[dict]] = defaultdict(list)
    for s in series:
        for st in s["steps"]:
            out[st["after"]["run_id"]].append({"series": s, "step": st})
    return dict(out)

