"""The report build's trend pass: each trend page's series made, rendered and kept one page at a time.

A year of nightly runs is ~60,000 points (every run × model × cell). Holding
them all for the trend pages made the report step's memory grow with the
store. Here a page (campaign × model) is the unit:

- a cache file per page (``.cardproof-series-<hash>.json`` beside the
  site) keeps each run's points of that page, the step search's memo and
  verdicts for its series, and the table rows and CSV lines its runs had on
  the page (report/history/tables.py, ``render.write_data_file``);
- one small head file (``.cardproof-trends-head.json``) keeps, per
  campaign, the runs whose points the page files hold (with their
  fingerprints, report/fingerprints.py), and per page the key of what its
  series show (``render.series_print``) and the steps each run starts
  (what a run article's lead says, report/lead_steps.py).

A campaign none of whose runs changed is not read at all: its pages' keys and
steps come from the head, and a page is read only where its key moved anyway
(its model's llama-bench points, the code). A campaign with a new or changed
run reads that run's rows once, then each page's file in turn: its series are
made, rendered where they changed, written back and let go before the next.
A first build (every run new) reads the store one model at a time, so even
it holds one page's points at once.

The files are JSON (report/history/cache_json.py): read as data, never run as
code, whoever wrote them. One that does not read, or is of other code (an older
layout, an older pickle), is no cache: its runs are read from the store again
and the file is written anew.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path

from .. import queries
from ..cell_kinds import SQL_KINDS
from . import cache_json
from .llama_bench import bench_series
from .render import Trends, page_print, runs_of_steps, series_print
from .conditions import _among
from .series import KIND_METRICS, _excluded_samples, _run_points, run_settings, series_of_points, slug

#: the layout of the cache files; another one is read as no cache (5 and before: a file per campaign;
#: 7: spreads with slots, whose pickled state is no longer a dict; 8: campaign settings as conditions, and
#: the differences that cannot move a figure kept apart, ``aside``; 9: JSON in place of pickles)
FORMAT = 9
HEAD = ".cardproof-trends-head.json"
_STEM = ".cardproof-series"
#: a campaign with at most this many new or changed runs reads their rows once for all its models; with
#: more (a first build, a code change) it reads them one model at a time, to hold one page's points at once
FEW_RUNS = 20
#: what the trend pages keep on a point (its table rows and its CSV line): kept in the page file apart
#: from the points, and put back only on a point made from the same run data
_TEXTS = ("_rows", "_csv")


def page_file(folder: Path, campaign: str, model: str) -> Path:
    """The cache file of a campaign × model page: named by a hash (the names are foreign text)."""
    digest = hashlib.sha256(json.dumps([str(campaign), str(model)]).encode()).hexdigest()[:24]
    return folder / f"{_STEM}-{digest}.json"


def page_names(pairs) -> dict[tuple[str, str], str]:
    """(campaign, model) -> its trend page's name; two pairs whose names slug alike get distinct pages
    (``render.assign_pages`` gives the same names from the series)."""
    by_base: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for camp, model in set(pairs):
        by_base[f"trend-{slug(camp)}-{slug(model)}"].append((camp, model))
    return {pair: base if i == 0 else f"{base}-{i + 1}"
            for base, group in by_base.items() for i, pair in enumerate(sorted(group, key=_text_pair))}


def _text_pair(pair: tuple) -> tuple[str, str]:
    """A sort key that holds for a damaged row's missing name too (report/tolerance.py reads it as NULL)."""
    return (str(pair[0]), str(pair[1]))


def _read(path: Path):
    try:
        data = cache_json.loads(path.read_bytes())
    except Exception:  # noqa: BLE001 -- none yet, cut short, damaged or of other code: no cache
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _write_atomic(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(cache_json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # no cache: the next build reads these runs again


def _step_entry(s: dict, st: dict) -> dict:
    """What a run article's lead shows of a step it starts (report/lead_steps.py), without the points."""
    return {"series": {k: s.get(k) for k in ("page", "campaign", "model", "prompt_class", "reasoning", "kind",
                                             "streams", "depth_tokens", "rate_rps")},
            "step": {"metric": st["metric"], "before": {"run_id": st["before"]["run_id"]},
                     "after": {"run_id": st["after"]["run_id"]}, "change": st["change"], "low": st["low"],
                     "high": st["high"]}}


def _starts(series: list[dict]) -> dict[int, list[dict]]:
    """``render.runs_of_steps`` without the points: what the head keeps for the leads."""
    return {rid: [_step_entry(e["series"], e["step"]) for e in entries]
            for rid, entries in runs_of_steps(series).items()}


def _points_of(entry, run: dict, model: str) -> list[tuple] | None:
    """A run's points of one page as a page file keeps them (print, [(key, point)]), checked to be
    this run's and model's; None where the entry is not usable."""
    try:
        points = entry[1]
        if not isinstance(points, list):
            return None
        for key, p in points:
            if len(key) != 8 or key[2] not in KIND_METRICS or key[0] != run["campaign_name"] or key[1] != model \
                    or p["run_id"] != run["id"] \
                    or not isinstance(p["spread"], dict) or not isinstance(p["values"], dict):
                return None
        return points
    except (KeyError, TypeError, ValueError, IndexError):
        return None


class _Campaign:
    """One campaign's runs and the points of its new or changed runs, read from the store as pages ask."""

    def __init__(self, db, name: str, runs: list[dict], prints: dict[int, str], head: dict | None):
        self.db, self.name, self.runs, self.prints = db, name, runs, prints
        self.sig = repr([(r["id"], prints.get(r["id"]), r["_limits"]["min_effect"]) for r in runs])
        known = head.get("runs") if isinstance(head, dict) and isinstance(head.get("runs"), dict) else {}
        # the runs whose points the page files may hold as they are now
        self.fresh = [r for r in runs if known.get(r["id"]) != prints.get(r["id"]) or prints.get(r["id"]) is None]
        self._excluded: dict[tuple, set[int]] = {}
        self._made: dict[int, list[tuple]] | None = None

    def excluded(self, runs: list[dict]) -> set[int]:
        """The samples of ``runs`` an excluding gate fired on: read once for every model's page."""
        ids = tuple(r["id"] for r in runs)
        if ids not in self._excluded:
            self._excluded[ids] = _excluded_samples(self.db, runs, _among("samples.run_id", list(ids)))
        return self._excluded[ids]

    def made(self, runs: list[dict], model: str) -> dict[int, list[tuple]]:
        """The points of ``runs`` for ``model``, read from the store."""
        if not runs:
            return {}
        if runs is self.fresh and len(self.fresh) <= FEW_RUNS:
            if self._made is None:  # a night's run or two: read once for every model of the campaign
                self._made = _run_points(self.db, self.fresh, None, restrict=True, excluded=self.excluded(self.fresh))
            return {rid: [(k, p) for k, p in pts if k[1] == model] for rid, pts in self._made.items()}
        return _run_points(self.db, runs, model, restrict=True, excluded=self.excluded(runs))

    def models(self) -> set[str]:
        """The models of the campaign's new or changed runs (the page files name the others)."""
        if not self.fresh:
            return set()
        return {m for (m,) in self.db.execute(
            f"""select distinct models.name from cells join models on models.id = cells.model_id
                where coalesce(cells.kind, 'measure') in {SQL_KINDS}"""
            + _among("cells.run_id", [r["id"] for r in self.fresh]))}


def trend_pass(db, project: Path, prints: dict[int, str], *, show_addresses: bool = False,
               progress=None) -> tuple[dict[int, list[dict]], list[Path]]:
    """Every trend page of the store, made and rendered one at a time; returns (run id -> the steps the
    run starts, for the leads: report/lead_steps.py; the files written)."""
    folder = Path(project) / "site"
    folder.mkdir(parents=True, exist_ok=True)
    runs = queries.runs(db)
    run_settings(db, runs)  # each run's ``_limits``, its minimum effect among them
    by_campaign: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by_campaign[r["campaign_name"]].append(r)
    for camp_runs in by_campaign.values():
        camp_runs.sort(key=lambda r: (r["started_at"] or "", r["id"]))
    head = _read(folder / HEAD) or {}
    old = head.get("campaigns") if isinstance(head.get("campaigns"), dict) else {}
    campaigns = {name: _Campaign(db, name, camp_runs, prints, old.get(name)) for name, camp_runs in by_campaign.items()}

    # every page's (campaign, model), for the names first: two that slug alike are told apart across campaigns
    models: dict[str, set[str]] = {}
    for name, c in campaigns.items():
        entry = old.get(name) if isinstance(old.get(name), dict) else {}
        pages = entry.get("pages") if isinstance(entry.get("pages"), dict) else {}
        models[name] = set(pages) | c.models() if len(c.fresh) < len(c.runs) or not c.runs else c.models()
    names = page_names((camp, m) for camp, ms in models.items() for m in ms)
    bench = bench_series(db, sorted({m for ms in models.values() for m in ms}, key=str))
    trends = Trends(project, show_addresses=show_addresses)
    starts: dict[int, list[dict]] = defaultdict(list)
    new_head: dict[str, dict] = {}
    wanted: set[Path] = set()
    total = sum(len(ms) for ms in models.values())
    done = 0
    for camp in sorted(campaigns, key=str):
        c = campaigns[camp]
        entry = old.get(camp) if isinstance(old.get(camp), dict) else {}
        kept_pages = entry.get("pages") if isinstance(entry.get("pages"), dict) else {}
        unchanged = entry.get("sig") == c.sig and not c.fresh
        pages_head: dict[str, dict] = {}
        for model in sorted(models[camp], key=str):
            done += 1
            name = names[(camp, model)]
            path = page_file(folder, camp, model)
            page_bench = bench.get(model, {})
            kept = kept_pages.get(model) if unchanged else None
            if isinstance(kept, dict) and kept.get("name") == name and isinstance(kept.get("print"), str) \
                    and isinstance(kept.get("starts"), dict) and path.exists():
                key = page_print(kept["print"], page_bench, trends.code)
                if trends.fresh(name, key):  # nothing it shows changed: neither read nor rendered
                    wanted.add(path)
                    pages_head[model] = kept
                    for rid, entries in kept["starts"].items():
                        starts[rid] += entries
                    continue
            made = _page(c, model, name, path, trends, page_bench, progress=progress)
            if made is None:
                continue  # no point of this model in the campaign any more: no page
            wanted.add(path)
            pages_head[model] = made
            for rid, entries in made["starts"].items():
                starts[rid] += entries
            if progress:
                progress(f"[{done}/{total}] trend page {name}")
        if pages_head:
            new_head[camp] = {"sig": c.sig, "runs": {r["id"]: prints.get(r["id"]) for r in c.runs},
                              "pages": pages_head}
    written = trends.finish()
    for f in folder.glob(f"{_STEM}-*.json"):  # pages and campaigns no longer in the store
        if f not in wanted:
            f.unlink(missing_ok=True)
    for f in [*folder.glob(f"{_STEM}-*.pickle"), *folder.glob(".cardproof-trend-texts-*.pickle"),
              folder / f"{_STEM}.pickle", folder / ".cardproof-trends-head.pickle"]:
        f.unlink(missing_ok=True)  # older layouts' pickles: never read, gone once a build has its JSON
    _write_atomic(folder / HEAD, {"format": FORMAT, "campaigns": new_head})
    return dict(starts), written


def _page(c: _Campaign, model: str, name: str, path: Path, trends: Trends, page_bench: dict,
          progress=None) -> dict | None:
    """One page's series made (its kept points and the new runs' from the store), rendered where its key
    moved, and its file written back; returns its head entry (None where it has no point)."""
    collecting = gc.isenabled()
    gc.disable()  # tens of thousands of small objects made and let go: the collector need not walk them
    try:
        part = _read(path) or {}
        if part.get("campaign") != c.name or part.get("model") != model:
            part = {}
        kept_runs = part.get("runs") if isinstance(part.get("runs"), dict) else {}
        fresh_ids = {r["id"] for r in c.fresh}
        points: dict[int, list[tuple]] = {}
        lost = []
        for r in c.runs:
            if r["id"] in fresh_ids:
                continue
            entry = kept_runs.get(r["id"])
            got = _points_of(entry, r, model) if isinstance(entry, tuple) and len(entry) == 2 \
                and entry[0] == c.prints.get(r["id"]) else None
            if got is None:
                lost.append(r)  # not in the file as it is now (damaged, removed): read again
            else:
                points[r["id"]] = got
        points |= c.made(c.fresh, model)
        points |= c.made(lost, model) if lost else {}
        grouped: dict[tuple, list[dict]] = defaultdict(list)
        for r in c.runs:
            for key, point in points.get(r["id"], []):
                point["_print"] = c.prints.get(r["id"])  # the run's data it was made from: the page's key uses it
                grouped[tuple(key)].append(point)
        if not grouped:
            return None
        memo_old = part.get("steps") if isinstance(part.get("steps"), dict) else {}
        judged_old = part.get("judged") if isinstance(part.get("judged"), dict) else {}
        memo: dict = {}
        judged: dict = {}
        min_effect = {r["campaign_id"]: r["_limits"]["min_effect"] for r in c.runs}
        series = series_of_points(grouped, min_effect.__getitem__, (memo_old, memo), (judged_old, judged))
        for s in series:
            s["page"] = name
        of_series = series_print(series)
        key = page_print(of_series, page_bench, trends.code)
        texts_old = part.get("texts") if isinstance(part.get("texts"), dict) else {}
        if not trends.fresh(name, key):
            for s in series:  # the rows and CSV lines of points made from the same run data
                skey = _series_key(s)
                for p in s["points"]:
                    kept = texts_old.get((skey, p["run_id"]))
                    if type(kept) is tuple and len(kept) == 3 and kept[0] == p["_print"] is not None:
                        p["_rows"], p["_csv"] = kept[1], kept[2]
            trends.render(name, series, page_bench, key)
        texts = {}
        for s in series:
            skey = _series_key(s)
            for p in s["points"]:
                if p.get("_rows") or p.get("_csv"):
                    texts[(skey, p["run_id"])] = (p["_print"], p.get("_rows"), p.get("_csv"))
                elif (skey, p["run_id"]) in texts_old:  # a page kept as it was keeps its texts
                    texts[(skey, p["run_id"])] = texts_old[(skey, p["run_id"])]
                for k in _TEXTS:
                    p.pop(k, None)
        by_run: dict[int, list[tuple]] = {r["id"]: [] for r in c.runs}
        for key_, ps in grouped.items():
            for p in ps:
                by_run[p["run_id"]].append((key_, p))
        _write_atomic(path, {"format": FORMAT, "campaign": c.name, "model": model,
                             "runs": {rid: (c.prints.get(rid), pts) for rid, pts in by_run.items()},
                             "steps": memo, "judged": judged, "texts": texts})
        return {"name": name, "print": of_series, "starts": _starts(series)}
    finally:
        if collecting:
            gc.enable()


def _series_key(s: dict) -> tuple:
    return (s["model"], s.get("kind"), s.get("streams"), s.get("depth_tokens"), s.get("rate_rps"),
            s["prompt_class"], s["reasoning"])
