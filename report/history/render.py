"""Trend pages: one per campaign × model in both languages, with an index, under ``site/trends/``.

Each page shows every metric over the runs' dates (a chart per metric, a
line per cell), the steps found with their interval and the conditions
that changed, and a table per cell whose every figure links to its run.
A page whose figures, steps and conditions are unchanged since the last
build (a fingerprint file beside the pages) is neither rendered nor charted
again; pages of series no longer in the store go away.
"""

from __future__ import annotations

import csv
import gc
import hashlib
import io
import json
import os
import pickle
from collections import defaultdict
from functools import partial
from pathlib import Path

from .. import charts
from ..i18n import CATALOGUE, LANGUAGES, Lang
from ..mdsafe import MD, publishable, publishing, translator
from ..site import write_if_changed as _write_if_changed
from . import chart
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
                "aggregate_tps": "aggregate tok/s", "ttft_p90_ms": "TTFT p90"}
_FILE_KEYS = {"decode_tps": "decode", "prefill_tps": "prefill", "ttft_ms": "ttft", "load_seconds": "load",
              "aggregate_tps": "aggregate", "ttft_p90_ms": "ttft-p90"}
METRIC_AXES = {"decode_tps": "decode tok/s (median, min–max)", "prefill_tps": "prefill tok/s (median, min–max)",
               "ttft_ms": "TTFT ms (median, min–max)", "load_seconds": "load time s (median, min–max)",
               "aggregate_tps": "aggregate tok/s (one figure per run)",
               "ttft_p90_ms": "TTFT p90 ms (one figure per run)"}


def _suffix(lang: str) -> str:
    return "" if lang == "en" else f".{lang}"


def _run_link(p: dict, L: Lang) -> MD:
    build = MD(" ({} {})").format(L.gettext("build"), p["server_build"]) if p.get("server_build") else MD("")
    return MD("[{} {}](../runs/run-{}.md){}").format(L.gettext("run"), p["run_id"], p["run_id"], build)


def cell_name(s: dict, L: Lang) -> MD:
    """'short · reasoning off', 'load: 4 streams · short', 'depth 4,096 tokens · short' in ``L``."""
    kind = s.get("kind", "measure")
    if kind == "load":
        return MD("{} · {}").format(MD(L.gettext("load: {n} streams")).format(n=L.num(s["streams"], 0)),
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
        msg = ("{metric} of {model} rose {size} ({low}–{high}) between {before} and {after}, "
               "and stayed there for {stayed}." if step["change"] > 0 else
               "{metric} of {model} fell {size} ({low}–{high}) between {before} and {after}, "
               "and stayed there for {stayed}.")
    else:
        msg = ("{metric} of {model} ({cell}) rose {size} ({low}–{high}) between {before} and {after}, "
               "and stayed there for {stayed}." if step["change"] > 0 else
               "{metric} of {model} ({cell}) fell {size} ({low}–{high}) between {before} and {after}, "
               "and stayed there for {stayed}.")
    text = _(msg).format(
        metric=L.gettext(METRIC_NAMES[step["metric"]]), model=series["model"], cell=cell_name(series, L),
        size=L.pct(abs(step["change"]), 1), low=L.num(lo * 100, 1), high=L.pct(hi, 1),
        before=_run_link(step["before"], L), after=_run_link(step["after"], L),
        stayed=L.ngettext("%(num)s run", "%(num)s runs", step["stayed"]))
    if step["changes"]:
        text += MD(" ") + _("Changed between them:") + MD(" ") + MD("; ").join(
            MD("{} {} → {}").format(L.gettext(n), a, b) for n, a, b in step["changes"]) + MD(".")
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
    """This package, the templates and the catalogue: a change re-renders every chart."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for p in sorted([*here.glob("*.py"), *here.parent.glob("templates/trend*.j2"),
                     *here.parent.glob("locale/*/LC_MESSAGES/*.po"), here.parent / "charts.py"]):
        h.update(p.read_bytes())
    return h.hexdigest()


def _fingerprint(page_series: list[dict], bench: dict, code: str) -> str:
    """Everything a page shows (points, conditions that changed, steps, llama-bench) and the code that shows it."""
    h = hashlib.sha256(code.encode())

    def point(p):
        if p.get("_print"):  # the run's fingerprint stands for its values and spreads (report/fingerprints.py)
            return [p["run_id"], p["_print"], p["started_at"], p["cell_id"], p["state"], p["changes"], p.get("anchor")]
        return [p["run_id"], p["started_at"], p["server_build"], p["cell_id"], p["state"], p["changes"],
                [(m, sp and (sp.median, sp.low, sp.high, sp.n)) for m, sp in p["spread"].items()], p.get("anchor")]

    for s in page_series:
        h.update(json.dumps([s["campaign"], s["model"], s["prompt_class"], s["reasoning"], s["min_effect"],
                             s.get("kind"), s.get("streams"), s.get("depth_tokens"), s.get("rate_rps"),
                             [point(p) for p in s["points"]],
                             [[st["metric"], st["before"]["run_id"], st["after"]["run_id"], st["ratio"], st["low"],
                               st["high"], st["stayed"], st["changes"], st["skipped"]] for st in s["steps"]]],
                            default=str).encode())
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
    w = csv.writer(line)
    w.writerow(["campaign", "model", "prompt_class", "reasoning", "run", "started_at", "server_build", "state",
                *[f"{m}_{part}" for m in METRICS for part in ("median", "low", "high", "n")],
                "cell_kind", "streams", "depth_tokens", "rate_rps"])
    lines = [line.getvalue()]
    for s in page_series:
        for p in s["points"]:
            # a point of a run that did not change keeps its line from the last build (``_attach_texts``; the
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
            w.writerow([public(s["campaign"]), public(s["model"]), s["prompt_class"],
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
            if p["changes"] and p["run_id"] not in changes:
                changes[p["run_id"]] = {"point": p, "changes": p["changes"]}
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
    """The report's one Jinja environment (late import: the site build imports this module)."""
    try:
        from ..render import environment
    except ImportError:  # before build.py was split into modules
        from ..build import _env as environment
    return environment()


def trend_series(db, cache: Path | None = None, prints: dict[int, str] | None = None,
                 later: list | None = None) -> list[dict]:
    """Every series with its steps and final page names: computed once per build, read by the trend
    pages and by the run articles' leads (report/lead_steps.py).

    ``cache``: a file that keeps each run's points between builds, valid for the runs whose
    fingerprint (``prints``, report/fingerprints.py) is unchanged (see ``build_series``).
    ``later`` (a list): the cache is not written here; a callable that writes it is appended, for the
    caller to call once the pages are rendered (it also writes the texts the pages kept on the points,
    report/history/tables.py and ``write_data_file``, for the next build: ``_attach_texts``).
    """
    if cache is None or prints is None:
        series = build_series(db)
    else:
        # pickle, not JSON: a year of runs' points is ~50 MB of JSON, 2 s to read and 2 s to write, more
        # than computing them. The files are as trusted as the project folder they are in, whose mkdocs
        # hooks (.cardproof/mkdocs_hooks.py) the site build runs; one that does not read is no cache.
        # One file per campaign: a new run rewrites its own campaign's file, not a year of every campaign's.
        # a million small objects that live until the build ends: the cyclic collector would walk
        # them again and again while they are made (half the time of reading them)
        collecting = gc.isenabled()
        gc.disable()
        try:
            kept: dict = {part: {} for part in _CACHE_PARTS}
            loaded: dict = {}  # campaign -> its series as read: a campaign still holding them is not written
            for f in _cache_files(cache):
                try:
                    part = pickle.loads(f.read_bytes())
                except Exception:  # noqa: BLE001 -- cut short, damaged or of other code: read the store
                    continue
                if isinstance(part, dict) and part.get("format") == _CACHE_FORMAT \
                        and all(isinstance(part.get(k), dict) for k in _CACHE_PARTS):
                    for k in _CACHE_PARTS:
                        kept[k].update(part[k])
                    loaded.update({c: e.get("series") for c, e in part["series"].items() if isinstance(e, dict)})
            series = build_series(db, cache=kept["runs"], prints=prints, steps_memo=kept["steps"],
                                  judged_memo=kept["judged"], series_cache=kept["series"])
            parts = _cache_parts(kept, series)
        finally:
            # what was read and made here lives until the build ends: out of the collector's reach before it
            # runs again, or its first collection walks every point (0.4 s at a year of runs). The report
            # build gives them back when it ends (``build._frozen``); the cache is passed by it alone.
            gc.freeze()
            if collecting:
                gc.enable()
        save = partial(_save_cache, cache, parts,
                       {c for c in parts if c in loaded and (kept["series"].get(c) or {}).get("series") is loaded[c]})
        if later is None:
            save()
        else:
            later.append(save)
    assign_pages(series)
    return series


def _save_cache(cache: Path, parts: dict[str, dict], unchanged: set[str]) -> None:
    """Each campaign's cache file (``parts``), but those of ``unchanged`` campaigns whose files hold it;
    and the texts file of each campaign whose trend pages had theirs (``_attach_texts``)."""
    wanted = {_cache_file(cache, c) for c in parts}
    for camp, part in parts.items():
        path = _cache_file(cache, camp)
        series = (part["series"].get(camp) or {}).get("series") or []
        if any(s.get("_texts") for s in series):
            texts = {(_series_key(s), p["run_id"]): (p["_print"], p.get("_rows"), p.get("_csv"))
                     for s in series for p in s["points"]
                     if p.get("_print") is not None and (p.get("_rows") or p.get("_csv"))}
            try:
                _write_atomic(_texts_file(cache, camp), pickle.dumps(texts, protocol=pickle.HIGHEST_PROTOCOL))
            except OSError:
                pass
        for s in series:  # the texts are not the series cache's: a campaign whose pages stay is read faster
            s.pop("_texts", None)
            for p in s["points"]:
                for k in _TEXTS:
                    p.pop(k, None)
        if camp in unchanged and path.exists():
            continue  # none of its runs changed: its file holds what it would write
        try:
            _write_atomic(path, pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            pass  # no cache: the next build reads the campaign's runs again
    for f in [*_cache_files(cache), cache]:  # campaigns no longer in the store; the one-file layout
        if f not in wanted:
            f.unlink(missing_ok=True)
    texts_wanted = {_texts_file(cache, c) for c in parts}
    for f in cache.parent.glob(f"{_TEXTS_STEM}-*.pickle"):
        if f not in texts_wanted:
            f.unlink(missing_ok=True)


#: what the trend pages keep on a point (its table rows, report/history/tables.py, and its CSV line,
#: ``write_data_file``), in a file per campaign of their own: read only for a campaign whose pages are
#: rendered, not with every campaign's series
_TEXTS = ("_rows", "_csv")
_TEXTS_STEM = ".cardproof-trend-texts"


def _texts_file(cache: Path, campaign: str) -> Path:
    return cache.with_name(f"{_TEXTS_STEM}-{_cache_file(cache, campaign).stem.rsplit('-', 1)[1]}.pickle")


def _series_key(s: dict) -> tuple:
    return (s["model"], s.get("kind"), s.get("streams"), s.get("depth_tokens"), s.get("rate_rps"),
            s["prompt_class"], s["reasoning"])


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _attach_texts(cache: Path, campaign_series: list[dict]) -> None:
    """The kept rows and CSV lines of a campaign's points, each on its point if made from the same run
    data (its fingerprint, which covers the code); the series are marked so the build writes them back."""
    try:
        kept = pickle.loads(_texts_file(cache, campaign_series[0]["campaign"]).read_bytes())
    except Exception:  # noqa: BLE001 -- none yet, cut short or damaged: the texts are made again
        kept = None
    kept = kept if isinstance(kept, dict) else {}
    for s in campaign_series:
        s["_texts"] = True
        key = _series_key(s)
        for p in s["points"]:
            entry = kept.get((key, p["run_id"]))
            if type(entry) is tuple and len(entry) == 3 and entry[0] == p.get("_print") is not None:
                p["_rows"], p["_csv"] = entry[1], entry[2]


#: what each campaign's cache file keeps (``build_series``' ``cache``, ``steps_memo``, ``judged_memo``,
#: ``series_cache``)
_CACHE_PARTS = ("runs", "steps", "judged", "series")


def _cache_file(cache: Path, campaign: str) -> Path:
    """The campaign's cache file beside ``cache``: named by a hash (a campaign name is foreign text)."""
    digest = hashlib.sha256(str(campaign).encode()).hexdigest()[:24]
    return cache.with_name(f"{cache.stem}-{digest}{cache.suffix}")


def _cache_files(cache: Path) -> list[Path]:
    return sorted(cache.parent.glob(f"{cache.stem}-*{cache.suffix}"))


def _cache_parts(kept: dict, series: list[dict]) -> dict[str, dict]:
    """``kept`` (as ``build_series`` left it) split by campaign, each part a cache file's content."""
    parts: dict[str, dict] = defaultdict(lambda: {"format": _CACHE_FORMAT, **{k: {} for k in _CACHE_PARTS}})
    for rid, entry in kept["runs"].items():
        parts[str(entry.get("campaign"))]["runs"][rid] = entry
    for camp, entry in kept["series"].items():
        parts[camp]["series"][camp] = entry
    for s in series:  # the step memo's and the verdicts' entries each series used
        part = parts[s["campaign"]]
        for seed, key in s.get("_memo_keys") or []:
            if key is not None and key in kept["steps"]:
                part["steps"][key] = kept["steps"][key]
            if seed in kept["judged"]:
                part["judged"][seed] = kept["judged"][seed]
    return dict(parts)


#: the layout of the series cache; another one is read as no cache
#: 2: the steps of each series too; 3: a load step's TTFT p90; 4: the candidates' verdicts; 5: points as made
#: (not JSON-ready lists) and each campaign's finished series
_CACHE_FORMAT = 5


def write_trends(db, project: Path, *, show_addresses: bool = False, series: list[dict] | None = None,
                 cache: Path | None = None) -> list[Path]:
    """Every trend page and the trends index, both languages; returns the files written.

    ``series``: :func:`trend_series` of this build where the caller has it already. ``cache``: its
    cache file (the series' points keep the table rows and CSV lines of unchanged runs beside it).
    """
    out_dir = Path(project) / "site" / FOLDER
    img_dir = out_dir / "img"
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        old = json.loads((out_dir / _PRINTS).read_text())
    except (OSError, ValueError):
        old = {}
    if series is None:
        series = trend_series(db)
    pages = assign_pages(series)
    bench = bench_series(db, sorted({s["model"] for s in series}))
    prints, written = {}, []
    code = _code_fingerprint() + ("+addresses" if show_addresses else "")
    try:
        old_index = json.loads((out_dir / _INDEX).read_text())
    except (OSError, ValueError):
        old_index = {}
    old_index = old_index if isinstance(old_index, dict) else {}
    index: dict[str, dict] = {lang: {} for lang in LANGUAGES}  # page -> its line on the index, per language
    attached: set = set()  # campaigns whose points have their kept texts
    for name, page_series in sorted(pages.items()):
        page_bench = bench.get(page_series[0]["model"], {})
        prints[name] = _fingerprint(page_series, page_bench, code)
        files = [out_dir / f"{name}{_suffix(lang)}.md" for lang in LANGUAGES]
        if old.get(name) == prints[name] and all(f.exists() for f in files):
            continue  # nothing it shows has changed: neither its Markdown nor its charts are made again
        camp = page_series[0]["campaign"]
        if cache is not None and camp not in attached:
            attached.add(camp)
            _attach_texts(cache, [s for s in series if s["campaign"] == camp])
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
        for L, path in zip(langs, files):
            lang = L.code
            view = _page_view(page_series, L)
            index[lang][name] = _index_entry(view, prints[name])
            view["bench"] = sorted((p for points in page_bench.values() for p in points),
                                   key=lambda p: (str(p["test"]), str(p["date"] or ""), p["id"]))
            with publishing(show_addresses=show_addresses):
                _ = translator(L.gettext, CATALOGUE)
                text = _env().get_template("trend.md.j2").render(
                    _=_, L=L, page=view, charts=charts_out[lang], metric_names=METRIC_NAMES, metrics=list(METRICS),
                    num=formatter(L), when=dates(L), row=row_maker(L, _))
            if _write_if_changed(path, text):
                written.append(path)
    for lang in LANGUAGES:
        L = Lang(lang)
        # a page that did not change keeps its line from the last build (its step sentences are the most
        # of it): one new run does not make every page's view again for the index
        for name in sorted(pages):
            if name in index[lang]:
                continue  # rendered above
            kept = old_index.get(lang, {}).get(name) if isinstance(old_index.get(lang), dict) else None
            if isinstance(kept, dict) and kept.get("print") == prints[name] and isinstance(kept.get("steps"), list):
                index[lang][name] = kept
            else:
                index[lang][name] = _index_entry(_page_view(pages[name], L), prints[name])
        views = [{**index[lang][name], "steps": [{"text": MD(t)} for t in index[lang][name]["steps"]]}
                 for name in sorted(pages)]
        with publishing(show_addresses=show_addresses):
            text = _env().get_template("trend_index.md.j2").render(_=translator(L.gettext, CATALOGUE), L=L,
                                                                    pages=views)
        path = out_dir / f"index{_suffix(lang)}.md"
        if _write_if_changed(path, text):
            written.append(path)
    _remove_stale(out_dir, set(pages))
    (out_dir / _PRINTS).write_text(json.dumps(prints, indent=1, sort_keys=True))
    try:
        (out_dir / _INDEX).write_text(json.dumps(index, sort_keys=True))
    except OSError:
        pass  # only a shortcut for the next build
    return written


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

