"""The report step: every run's articles from the store into the MkDocs tree, then the site.

The jobs live in their own modules: ``views`` (what an article shows),
``render`` and ``article_parts`` (Markdown from templates), ``fingerprints``
(what needs rendering again), ``site`` (scaffold and ``mkdocs build``).
This module decides what to render and writes the files.
"""

from __future__ import annotations

import contextlib
import gc

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cardproof.daemon.store import open_store

from . import charts, queries
from .compare import compare_runs
from .contradictions.authored import AuthoredError
from .fingerprints import (MANIFEST, StoredLine, build_gate, code_fingerprint, combine, pages_state, read_gate,
                           read_manifest, run_fingerprints, write_gate, write_manifest)
from .home import write_home
from .addenda import addenda, published_runs, with_addenda
from .exports import remove_stale_samples, sample_files, with_downloads, write_public_database, write_run_samples
from .feed import date_line, dated, feed_environment
from .site_settings import SiteSettingsError, read_site_settings, site_environment
from .i18n import LANGUAGES, Lang
from .llama_bench import llama_bench_view
from .tolerance import shielded
from .summaries import ComparisonSummary, RunSummary, model_figures, no_headline_reason, previous_runs, ratio_range
from .views import article_view, models_across
from .lead_steps import lead_steps, steps_print
from .history.pages import trend_pass

# Other modules and tests import these from here.
from .article_parts import cell_value as _cellvalue, merged_caveats, render_caveat, run_charts as _charts  # noqa: F401
from .mdsafe import MD, code_span, esc, markdown_environment, publishing, translator  # noqa: F401
from .render import (environment as _env, link_evidence, render_compare, render_evidence,  # noqa: F401
                     render_archive, render_home, render_index, render_run)
from .site import ReportError, mkdocs_build, scaffold  # noqa: F401
from .site import write_if_changed as _write_if_changed


def _lang_file(folder: Path, stem: str, lang: str) -> Path:
    """``stem.md`` in English, ``stem.<lang>.md`` otherwise (mkdocs-static-i18n's suffix layout)."""
    return folder / f"{stem}{'' if lang == 'en' else '.' + lang}.md"


def write_articles(db_path: Path, project: Path, *, progress=None, show_addresses: bool = False,
                   opened=None) -> list[Path]:
    """Write every run article in both languages; returns the files (re)written.

    Incremental: a run whose data, notes and comparison partner are unchanged
    since the last build (per the manifest beside the articles) is not
    rendered again, nor is its run view built; the cross-run pages read its
    summary from the manifest. A page whose Markdown comes out unchanged is
    not written (its file time stays, so the site build can skip it).

    ``opened()`` is called once the store has been opened and found to be cardproof's (not when
    nothing changed and the store is not opened at all).
    """
    # before the store is read: a write during the build makes the next build look again
    gate = build_gate(db_path, project, code_fingerprint() + ("+addresses" if show_addresses else ""))
    if read_gate(project) == gate:
        return []  # the store, code, notes and pages are as the last build left them: nothing to do
    store = open_store(db_path, mode="ro")  # the report only reads
    if opened is not None:
        opened()
    try:
        # damaged rows: named on stderr and read as NULL, the build goes on
        with shielded(store, checked=project / "site" / DAMAGE_CHECKED), charts.deferred(), _frozen():
            written, manifest, manifest_path, old = _write_articles(store.db, project, progress, show_addresses)
        # only once every chart exists may the manifest call these articles fresh
        write_manifest(manifest_path, manifest, old)
    finally:
        store.close()
    write_gate(project, gate | pages_state(project))
    return written


@contextlib.contextmanager
def _frozen():
    """Objects frozen out of the cyclic collector during the build (``gc.freeze``) go back to it after."""
    try:
        yield
    finally:
        gc.unfreeze()


class _RecentViews(OrderedDict):
    """The run views built last (run id -> ``queries.run_view``), at most ``keep`` of them.

    A full build renders every run; holding every view would make the
    step's memory grow with the database. A run needs its own view and its
    previous run's, built a few runs earlier.
    """

    def __init__(self, build, keep: int = 16):
        super().__init__()
        self._build, self._keep = build, keep

    def of(self, rid: int) -> dict:
        if rid in self:
            self.move_to_end(rid)
        else:
            self[rid] = self._build(rid)
            while len(self) > self._keep:
                self.popitem(last=False)
        return self[rid]


def _page_producers():
    """Pages beyond the runs and their comparisons, each ``produce(db, project, show_addresses=...) -> [Path]``.

    One place to add a kind of page; each producer decides itself what it
    rewrites. (The trend pages come first, from ``trend_pass``: the run
    articles' leads name the steps they find.)
    """
    from .observed import write_log_articles  # server logs imported with no run

    return [write_log_articles]


def _write_articles(db, project: Path, progress, show_addresses: bool) -> tuple[list[Path], dict, Path, dict]:
    """Render what changed; returns the files written, the new manifest, where it goes and the old one."""
    all_runs = queries.runs(db)
    n_models = dict(db.execute("select run_id, count(distinct model_id) from cells group by run_id").fetchall())
    for r in all_runs:
        r["n_models"] = n_models.get(r["id"], 0)
    out_dir = project / "site" / "runs"
    cmp_dir = project / "site" / "compare"
    for d in (out_dir, cmp_dir):
        d.mkdir(parents=True, exist_ok=True)
    manifest_path = project / "site" / MANIFEST
    old = read_manifest(manifest_path)
    code = code_fingerprint() + ("+addresses" if show_addresses else "")
    prints = run_fingerprints(db, all_runs, project, code)
    # a step is confirmed by later runs: the run that starts it learns so then, so its steps are in its key.
    # The trend pages are made and rendered one at a time (a year of points is never held at
    # once), each run's points kept between builds; what the leads need of their steps comes back.
    starts, written = trend_pass(db, project, prints, show_addresses=show_addresses, progress=progress)
    # the manifest and the summaries live until the build ends: the cyclic collector
    # need not walk them again on every collection of the pages' short-lived objects
    gc.freeze()
    prev = previous_runs(all_runs)
    # A run article shows its own data, its comparison with the previous run and the campaign's
    # ratio range up to itself: its key covers the previous run and every earlier run of the campaign.
    keys = {}
    upto: dict[str, list[str]] = {}
    for r in sorted(all_runs, key=lambda r: (r["started_at"] or "", r["id"])):
        upto.setdefault(r["campaign_name"], []).append(prints[r["id"]])
        p_id = prev[r["id"]]
        own = combine(prints[r["id"]], prints.get(p_id, "") if p_id else "", combine(*upto[r["campaign_name"]]))
        keys[f"run-{r['id']}"] = combine(own, steps_print(starts.get(r["id"])))
        # the evidence page and sample files show none of the steps (only the article's lead names them):
        # a later run that confirms or moves a step renders this run's article again, not its raw records
        keys[f"run-{r['id']}-evidence"] = own
        if p_id:
            keys[f"run-{r['id']}-vs-{p_id}"] = combine(prints[r["id"]], prints[p_id])
    views = _RecentViews(lambda rid: queries.run_view(db, rid))
    old_runs = old["runs"]
    summaries: dict[int, RunSummary] = {}

    def summary_of(r: dict) -> RunSummary:
        cached = old_runs.get(str(r["id"]))
        try:
            if isinstance(cached, StoredLine):  # read again from the file when its cells or line are needed
                kept = RunSummary.from_line(cached.text(), cached.text)
                if kept.fingerprint == prints[r["id"]]:
                    return kept
            elif isinstance(cached, dict) and cached.get("fingerprint") == prints[r["id"]]:
                return RunSummary.from_json(cached)  # a manifest of the older layout
        except (KeyError, TypeError, ValueError):
            pass  # a damaged manifest: built again
        return RunSummary.of(views.of(r["id"]), prints[r["id"]])

    def fresh(key: str, files: list[Path]) -> bool:
        return old["pages"].get(key) == keys[key] and all(f.exists() for f in files)

    def write_run(r: dict) -> bool:
        """The article and evidence page of ``r`` in every language, unless fresh; True when rendered."""
        key = f"run-{r['id']}"
        files = [_lang_file(out_dir, key, lang) for lang in LANGUAGES]
        ev_files = [_lang_file(out_dir, f"{key}-evidence", lang) for lang in LANGUAGES]
        ev_fresh = fresh(f"{key}-evidence", ev_files + sample_files(out_dir, r["id"]))
        if ev_fresh and fresh(key, files):
            return False
        base = views.of(r["id"])
        h = base["headline"]
        ratio = None
        if h and h.get("other") and r["status"] == "completed":  # an unfinished run gets no headline
            rr = ratio_range(all_runs, summaries, r, h["best"]["name"], h["other"]["name"], h["cls"])
            ratio = rr | {"a": h["best"]["name"], "b": h["other"]["name"]} if rr else None
        if prev[r["id"]]:
            views.of(prev[r["id"]])  # the comparison reads both runs' samples
        view = article_view(db, base, previous_id=prev[r["id"]], ratio=ratio, views=views, project=project,
                            show_addresses=show_addresses).context()
        view["lead"] = view["lead"] | {"steps": lead_steps(starts.get(r["id"]))}  # the steps it starts
        for h in (view["comparison"] or {}).get("held", []):  # the previous headline's ratio across runs
            h["across"] = ratio_range(all_runs, summaries, r, h["before"]["best"], h["before"]["other"], h["cls"])
        # downloads, addenda and the feed's date are part of the page as first written: each file once
        entries = addenda(db, r["id"], view) if r["id"] in published else None
        when = date_line(r["started_at"])
        for lang, path, ev_path in zip(LANGUAGES, files, ev_files):
            text = render_run(view, lang, out_dir / "img", project, show_addresses=show_addresses)
            if entries is not None:
                text = with_addenda(text, r["id"], entries, Lang(lang))
            if _write_if_changed(path, dated(text, when)):
                written.append(path)
            if ev_fresh:
                continue
            ev_text = with_downloads(render_evidence(view, lang, show_addresses=show_addresses), r["id"], Lang(lang))
            if _write_if_changed(ev_path, ev_text):
                written.append(ev_path)
        if not ev_fresh:  # the run's samples (CSV, JSON) beside its evidence
            written.extend(write_run_samples(db, out_dir, r["id"], show_addresses=show_addresses))
        return True

    published = published_runs(db)  # these runs' articles carry an Addenda section
    comparisons: dict[int, ComparisonSummary] = {}
    total = len(all_runs)
    # Oldest first: a run's ratio range reads the summaries of its campaign's earlier runs, and its
    # comparison the view of the run before it, which was built a few runs ago and is still held.
    for i, r in enumerate(reversed(all_runs), 1):
        summaries[r["id"]] = summary_of(r)
        if write_run(r):
            if progress:
                progress(f"[{i}/{total}] run {r['id']} rendered")
        p_id = prev[r["id"]]
        if p_id is None:
            continue
        key = f"run-{r['id']}-vs-{p_id}"
        files = [_lang_file(cmp_dir, key, lang) for lang in LANGUAGES]
        if fresh(key, files) and isinstance(old["comparisons"].get(key), dict):
            try:
                comparisons[r["id"]] = ComparisonSummary.from_json(old["comparisons"][key], key)
                continue
            except (KeyError, TypeError, ValueError):
                pass
        views.of(p_id), views.of(r["id"])  # the comparison reads both runs' samples
        cmp = compare_runs(db, p_id, r["id"], views)
        for lang, path in zip(LANGUAGES, files):
            if _write_if_changed(path, render_compare(cmp, lang, cmp_dir / "img", show_addresses=show_addresses)):
                written.append(path)
        comparisons[r["id"]] = ComparisonSummary.of(cmp, key)
    comparisons = [comparisons[r["id"]] for r in all_runs if r["id"] in comparisons]  # newest first
    # unfinished runs stay out of every cross-run figure; their own articles still show what they stored
    models = models_across([r for r in all_runs if r["status"] == "completed"],
                           lambda rid: model_figures(summaries[rid]), keep=MODEL_RUNS,
                           models_of=lambda rid: summaries[rid].models)
    for r in all_runs:  # the index states each finished run's headline by the article's rule
        r["headline"] = summaries[r["id"]].headline if r["status"] == "completed" else None
        r["no_headline"] = no_headline_reason(summaries[r["id"]]) if r["status"] == "completed" else None
    bench = llama_bench_view(db)
    archives = _archives(all_runs, comparisons, prints, keys) if len(all_runs) > INDEX_RUNS else []
    for a in archives:
        files = [_lang_file(out_dir, a["name"], lang) for lang in LANGUAGES]
        if fresh(a["name"], files):
            continue  # a month with no new or changed run: its page is not rendered again
        for lang, path in zip(LANGUAGES, files):
            if _write_if_changed(path, render_archive(a["month"], a["runs"], a["comparisons"], lang,
                                                      show_addresses=show_addresses)):
                written.append(path)
    for lang in LANGUAGES:
        p = _lang_file(out_dir, "index", lang)
        if _write_if_changed(p, render_index(all_runs[:INDEX_RUNS], lang, comparisons[:INDEX_RUNS], models,
                                             bench, archives=archives, model_runs=MODEL_RUNS,
                                             older_comparisons=max(0, len(comparisons) - INDEX_RUNS),
                                             show_addresses=show_addresses)):
            written.append(p)
    written += write_home(project / "site", lambda lang: render_home(all_runs, lang, comparisons,
                                                                    show_addresses=show_addresses))
    for produce in _page_producers():
        written += produce(db, project, show_addresses=show_addresses)
    _remove_stale(out_dir, cmp_dir, keys)
    remove_stale_samples(out_dir, [r["id"] for r in all_runs])
    manifest = {"pages": keys, "runs": {str(rid): s for rid, s in summaries.items()},
                "comparisons": {c.key: c.to_json() for c in comparisons}}
    return written, manifest, manifest_path, old


#: how far each table of the store was found free of damaged values (report/tolerance.py)
DAMAGE_CHECKED = ".cardproof-damage-checked.json"

#: runs (and comparisons) on the runs index; with more, every run is also on its month's page
INDEX_RUNS = 50
#: each model's latest runs under "Models across runs"; the older ones are on its trend page
MODEL_RUNS = 5


def _archives(all_runs: list[dict], comparisons: list, prints: dict, keys: dict) -> list[dict]:
    """Month pages of every run (newest month first), each with its key in ``keys``.

    A month's key covers what its page shows of each run (the run's fingerprint, its status and
    coverage, its headline's inputs) and of each comparison, so a page is rendered again only when
    one of its runs changed or one was added: a new run touches the current month alone.
    """
    by_month: dict[str, dict] = {}
    cmp_of = {c.b["id"]: c for c in comparisons}
    for r in all_runs:  # newest first
        month = (r["started_at"] or "")[:7]
        month = month if len(month) == 7 and month[4] == "-" and (month[:4] + month[5:]).isdigit() else "undated"
        a = by_month.setdefault(month, {"month": month, "name": f"archive-{month}", "runs": [], "comparisons": [],
                                        "parts": []})
        a["runs"].append(r)
        a["parts"].append(prints.get(r["id"], "") + repr([r["status"], r.get("coverage"), r.get("samples_measured"),
                                                          r.get("samples_planned"), r.get("n_models"),
                                                          r.get("no_headline")]))
        c = cmp_of.get(r["id"])
        if c is not None:
            a["comparisons"].append(c)
            a["parts"].append(c.key + keys.get(c.key, ""))
    out = []
    for a in by_month.values():
        keys[a["name"]] = combine(*a.pop("parts"))
        a["n"] = len(a["runs"])
        out.append(a)
    return out


def _remove_stale(out_dir: Path, cmp_dir: Path, keys: dict) -> None:
    """Articles (and their charts) of runs no longer in the database go away, and month pages no run is in."""
    for f in out_dir.glob("archive-*.md"):
        if f.name.split(".")[0] not in keys:
            f.unlink()
    for d in (out_dir, cmp_dir):
        for f in d.glob("run-*.md"):
            if f.name.split(".")[0].removesuffix("-evidence") not in keys:
                f.unlink()
        for f in (d / "img").glob("*.svg") if (d / "img").is_dir() else []:
            stem = f.stem.rsplit("-", 1)[0]
            base = "-".join(stem.split("-")[:2]) if d == out_dir else stem.replace("compare-", "run-")
            if base not in keys:
                f.unlink()


def build(db_path: Path, project: Path, *, run_mkdocs: bool = True, show_addresses: bool = False,
          site_url: str | None = None) -> dict:
    """Scaffold if needed, write articles, build. Returns paths for the CLI to print."""
    try:
        settings = read_site_settings(project)  # before anything is written: a bad file stops here
    except SiteSettingsError as exc:
        raise ReportError(str(exc)) from exc
    scaffold(project)
    # The publishable database beside the evidence (each run's samples come with its
    # articles). Made on a thread of its own while the articles render: the copy and the row compare run
    # inside SQLite, which lets go of the GIL, so at a year of runs their seconds overlap the pages'.
    # It starts only once the store has been opened and found to be cardproof's: a database that is
    # not ours is refused before anything else reads it. The `with` waits for it even when the
    # articles fail: no half-made copy is left behind.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="public-db") as pool:
        database = []

        def start_database() -> None:
            database.append(pool.submit(write_public_database, db_path, project / "site",
                                        show_addresses=show_addresses))

        try:
            written = write_articles(db_path, project, show_addresses=show_addresses, opened=start_database)
        except AuthoredError as exc:
            raise ReportError(str(exc)) from exc
        # nothing changed (the store not even opened): the copy's own record says whether it is current
        written += database[0].result() if database else write_public_database(
            db_path, project / "site", show_addresses=show_addresses)
    # a feed only where the public address is known; title and description from site.toml
    with feed_environment(site_url), site_environment(settings):
        out = mkdocs_build(project) if run_mkdocs else None
    return {"articles": written, "site_dir": out}
