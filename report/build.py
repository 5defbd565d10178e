"""The report step: every run's articles from the store into the MkDocs tree, then the site.

The jobs live in their own modules: ``views`` (what an article shows),
``render`` and ``article_parts`` (Markdown from templates), ``fingerprints``
(what needs rendering again), ``site`` (scaffold and ``mkdocs build``).
This module decides what to render and writes the files.

In short, ``build.py``: decides what to render and writes only pages whose text
changed: a run is read and rendered again only when its rows, notes or comparison partner changed
(or, for its article alone, the history steps its lead names: its evidence page and sample files
have a key of their own without them); the index pages come from per-run summaries kept in the
manifest. A build first compares the store's own record of its changes (per table its highest rowid
and its ``row_changes`` counts and salts, a small table the triggers do not count by its rows'
digest: ``fingerprints.store_state``, one read-only connection), the code, the notes (by their text)
and the site pages (``site/.cardproof-build-gate.json``, ``fingerprints.py``); if all are the same
it reads none of the store's rows. Never the files' size and time: a correction written within the
clock tick of the last build, or by a tool that restores the file time, left both as they were and
the articles kept the old figures. While a run is stored as ``running`` the gate never holds:
whether it still runs is its process's and the clock's to say (``daemon/store/liveness.py``). Each
article is complete when first written: downloads, addenda and the feed ``date:`` are rendered with
it, and the run's CSV/JSON exported then. The trend pages come first, one page (campaign × model) at
a time (``history.pages.trend_pass``): each page has a cache file
(``site/.cardproof-series-<hash>.json``) with its runs' points by run fingerprint, its series' steps
(keyed by their usable runs' fingerprints: the step search is deterministic), the verdicts of the
step candidates it judged, and the table rows and CSV lines of its points; a small head file
(``site/.cardproof-trends-head.json``) keeps per campaign the runs the page files hold and per page
the key of what its series show (``history.render.series_print``) and the steps each run starts,
which is all the run articles' leads need. A campaign none of whose runs changed is not read at all;
a campaign with a new run reads that run's rows once, then each page's file in turn (made, rendered
where its key moved, written back, let go); a first build reads the store one model at a time. So
the step holds one page's points at once, not a year of them. The trends index keeps each unchanged
page's line (``site/trends/.trend-index.json``, by page fingerprint). A chart drawn by vl-convert
ends with a comment naming what it was drawn from (``charts._spec_mark``): an article rendered again
with the same chart spec keeps the file. ``build()`` makes the public database on a thread while the
articles render. Objects that live for the whole build are frozen out of the cyclic collector
(``gc.freeze``). Compiled templates are kept per code fingerprint in the user's cache folder
(``render._bytecode_cache``, ``cardproof.paths.cache_dir``). The home page lists the latest
``render.HOME_RUNS`` runs and comparisons, the runs index the latest ``INDEX_RUNS``, month pages the
rest. Another kind of page is a producer in ``_page_producers()``
"""

from __future__ import annotations

import contextlib
import gc

from collections import OrderedDict
from dataclasses import dataclass, field
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
            done = _write_articles(store.db, project, progress, show_addresses)
        # only once every chart exists may the manifest call these articles fresh
        write_manifest(done.manifest_path, done.manifest, done.old)
    finally:
        store.close()
    write_gate(project, gate | pages_state(project))
    return done.files


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


@dataclass
class _Pass:
    """One build's shared state: the store's runs and their fingerprints, the last build's manifest, each
    page's key, the runs' summaries as they are made, and the files written."""

    db: object
    project: Path
    show_addresses: bool
    progress: object
    all_runs: list[dict]
    prints: dict[int, str]
    old: dict  # the last build's manifest
    starts: dict[int, list[dict]]  # run id -> the trend steps it starts (its article's lead)
    written: list[Path]
    prev: dict[int, int | None] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    summaries: dict[int, RunSummary] = field(default_factory=dict)
    published: set = field(default_factory=set)
    views: _RecentViews | None = None

    @property
    def out_dir(self) -> Path:
        return self.project / "site" / "runs"

    @property
    def cmp_dir(self) -> Path:
        return self.project / "site" / "compare"

    def fresh(self, key: str, files: list[Path]) -> bool:
        """Whether the page ``key`` was written by the last build from what it would show now."""
        return self.old["pages"].get(key) == self.keys[key] and all(f.exists() for f in files)

    def write(self, path: Path, text: str) -> None:
        if _write_if_changed(path, text):
            self.written.append(path)


@dataclass
class _Written:
    """What ``_write_articles`` leaves for the build: the files written and the manifest to write once every
    chart exists (``old`` is the last build's, whose stored lines the new one may reuse)."""

    files: list[Path]
    manifest: dict
    manifest_path: Path
    old: dict


def _write_articles(db, project: Path, progress, show_addresses: bool) -> _Written:
    """Render what changed; returns the files written, the new manifest, where it goes and the old one."""
    p = _start(db, project, progress, show_addresses)
    comparisons = _write_runs(p)
    _write_indexes(p, comparisons)
    for produce in _page_producers():
        p.written += produce(db, project, show_addresses=show_addresses)
    _remove_stale(p.out_dir, p.cmp_dir, p.keys)
    remove_stale_samples(p.out_dir, [r["id"] for r in p.all_runs])
    manifest = {"pages": p.keys, "runs": {str(rid): s for rid, s in p.summaries.items()},
                "comparisons": {c.key: c.to_json() for c in comparisons}}
    return _Written(p.written, manifest, project / "site" / MANIFEST, p.old)


def _start(db, project: Path, progress, show_addresses: bool) -> _Pass:
    """The runs and their fingerprints, the trend pages (first: the leads name their steps), each page's key."""
    all_runs = queries.runs(db)
    n_models = dict(db.execute("select run_id, count(distinct model_id) from cells group by run_id").fetchall())
    for r in all_runs:
        r["n_models"] = n_models.get(r["id"], 0)
    for d in (project / "site" / "runs", project / "site" / "compare"):
        d.mkdir(parents=True, exist_ok=True)
    old = read_manifest(project / "site" / MANIFEST)
    code = code_fingerprint() + ("+addresses" if show_addresses else "")
    prints = run_fingerprints(db, all_runs, project, code)
    # a step is confirmed by later runs: the run that starts it learns so then, so its steps are in its key.
    # The trend pages are made and rendered one at a time (a year of points is never held at
    # once), each run's points kept between builds; what the leads need of their steps comes back.
    starts, written = trend_pass(db, project, prints, show_addresses=show_addresses, progress=progress)
    # the manifest and the summaries live until the build ends: the cyclic collector
    # need not walk them again on every collection of the pages' short-lived objects
    gc.freeze()
    p = _Pass(db, project, show_addresses, progress, all_runs, prints, old, starts, written,
              prev=previous_runs(all_runs), published=published_runs(db))
    p.keys = _page_keys(p)
    p.views = _RecentViews(lambda rid: queries.run_view(db, rid))
    return p


def _page_keys(p: _Pass) -> dict[str, str]:
    """Each run page's key. A run article shows its own data, its comparison with the previous run and the
    campaign's ratio range up to itself: its key covers the previous run and every earlier run of the
    campaign."""
    keys = {}
    upto: dict[str, list[str]] = {}
    for r in sorted(p.all_runs, key=lambda r: (r["started_at"] or "", r["id"])):
        upto.setdefault(r["campaign_name"], []).append(p.prints[r["id"]])
        p_id = p.prev[r["id"]]
        own = combine(p.prints[r["id"]], p.prints.get(p_id, "") if p_id else "", combine(*upto[r["campaign_name"]]))
        keys[f"run-{r['id']}"] = combine(own, steps_print(p.starts.get(r["id"])))
        # the evidence page and sample files show none of the steps (only the article's lead names them):
        # a later run that confirms or moves a step renders this run's article again, not its raw records
        keys[f"run-{r['id']}-evidence"] = own
        if p_id:
            keys[f"run-{r['id']}-vs-{p_id}"] = combine(p.prints[r["id"]], p.prints[p_id])
    return keys


def _write_runs(p: _Pass) -> list[ComparisonSummary]:
    """Every run's article, evidence page and comparison with its previous run, where changed; returns the
    comparisons' summaries, newest first."""
    comparisons: dict[int, ComparisonSummary] = {}
    total = len(p.all_runs)
    # Oldest first: a run's ratio range reads the summaries of its campaign's earlier runs, and its
    # comparison the view of the run before it, which was built a few runs ago and is still held.
    for i, r in enumerate(reversed(p.all_runs), 1):
        p.summaries[r["id"]] = _summary_of(p, r)
        if _write_run(p, r) and p.progress:
            p.progress(f"[{i}/{total}] run {r['id']} rendered")
        if p.prev[r["id"]] is not None:
            comparisons[r["id"]] = _write_comparison(p, r, p.prev[r["id"]])
    return [comparisons[r["id"]] for r in p.all_runs if r["id"] in comparisons]


def _summary_of(p: _Pass, r: dict) -> RunSummary:
    """The run's summary: kept in the manifest while its fingerprint holds, else made from its view."""
    cached = p.old["runs"].get(str(r["id"]))
    try:
        if isinstance(cached, StoredLine):  # read again from the file when its cells or line are needed
            kept = RunSummary.from_line(cached.text(), cached.text)
            if kept.fingerprint == p.prints[r["id"]]:
                return kept
        elif isinstance(cached, dict) and cached.get("fingerprint") == p.prints[r["id"]]:
            return RunSummary.from_json(cached)  # a manifest of the older layout
    except (KeyError, TypeError, ValueError):
        pass  # a damaged manifest: built again
    return RunSummary.of(p.views.of(r["id"]), p.prints[r["id"]])


def _write_run(p: _Pass, r: dict) -> bool:
    """The article and evidence page of ``r`` in every language, unless fresh; True when rendered."""
    key = f"run-{r['id']}"
    files = [_lang_file(p.out_dir, key, lang) for lang in LANGUAGES]
    ev_files = [_lang_file(p.out_dir, f"{key}-evidence", lang) for lang in LANGUAGES]
    ev_fresh = p.fresh(f"{key}-evidence", ev_files + sample_files(p.out_dir, r["id"]))
    if ev_fresh and p.fresh(key, files):
        return False
    view = _run_view(p, r)
    # downloads, addenda and the feed's date are part of the page as first written: each file once
    entries = addenda(p.db, r["id"], view) if r["id"] in p.published else None
    when = date_line(r["started_at"])
    for lang, path, ev_path in zip(LANGUAGES, files, ev_files):
        text = render_run(view, lang, p.out_dir / "img", p.project, show_addresses=p.show_addresses)
        if entries is not None:
            text = with_addenda(text, r["id"], entries, Lang(lang))
        p.write(path, dated(text, when))
        if not ev_fresh:
            p.write(ev_path, with_downloads(render_evidence(view, lang, show_addresses=p.show_addresses), r["id"],
                                            Lang(lang)))
    if not ev_fresh:  # the run's samples (CSV, JSON) beside its evidence
        p.written.extend(write_run_samples(p.db, p.out_dir, r["id"], show_addresses=p.show_addresses))
    return True


def _run_view(p: _Pass, r: dict) -> dict:
    """What the run's article shows: its view with its headline's ratio across runs and the steps it starts."""
    base = p.views.of(r["id"])
    h = base["headline"]
    ratio = None
    if h and h.get("other") and r["status"] == "completed":  # an unfinished run gets no headline
        rr = ratio_range(p.all_runs, p.summaries, r, h["best"]["name"], h["other"]["name"], h["cls"])
        ratio = rr | {"a": h["best"]["name"], "b": h["other"]["name"]} if rr else None
    if p.prev[r["id"]]:
        p.views.of(p.prev[r["id"]])  # the comparison reads both runs' samples
    view = article_view(p.db, base, previous_id=p.prev[r["id"]], ratio=ratio, views=p.views, project=p.project,
                        show_addresses=p.show_addresses).context()
    view["lead"] = view["lead"] | {"steps": lead_steps(p.starts.get(r["id"]))}  # the steps it starts
    for h in (view["comparison"] or {}).get("held", []):  # the previous headline's ratio across runs
        h["across"] = ratio_range(p.all_runs, p.summaries, r, h["before"]["best"], h["before"]["other"], h["cls"])
    return view


def _write_comparison(p: _Pass, r: dict, p_id: int) -> ComparisonSummary:
    """The comparison of ``r`` with its previous run, unless fresh; its summary either way."""
    key = f"run-{r['id']}-vs-{p_id}"
    files = [_lang_file(p.cmp_dir, key, lang) for lang in LANGUAGES]
    if p.fresh(key, files) and isinstance(p.old["comparisons"].get(key), dict):
        try:
            return ComparisonSummary.from_json(p.old["comparisons"][key], key)
        except (KeyError, TypeError, ValueError):
            pass
    p.views.of(p_id), p.views.of(r["id"])  # the comparison reads both runs' samples
    cmp = compare_runs(p.db, p_id, r["id"], p.views)
    for lang, path in zip(LANGUAGES, files):
        p.write(path, render_compare(cmp, lang, p.cmp_dir / "img", show_addresses=p.show_addresses))
    return ComparisonSummary.of(cmp, key)


def _write_indexes(p: _Pass, comparisons: list[ComparisonSummary]) -> None:
    """The runs index, its month pages and the home page, from the runs' summaries."""
    all_runs, summaries = p.all_runs, p.summaries
    # unfinished runs stay out of every cross-run figure; their own articles still show what they stored
    models = models_across([r for r in all_runs if r["status"] == "completed"],
                           lambda rid: model_figures(summaries[rid]), keep=MODEL_RUNS,
                           models_of=lambda rid: summaries[rid].models)
    for r in all_runs:  # the index states each finished run's headline by the article's rule
        r["headline"] = summaries[r["id"]].headline if r["status"] == "completed" else None
        r["no_headline"] = no_headline_reason(summaries[r["id"]]) if r["status"] == "completed" else None
    bench = llama_bench_view(p.db)
    archives = _archives(all_runs, comparisons, p.prints, p.keys) if len(all_runs) > INDEX_RUNS else []
    for a in archives:
        files = [_lang_file(p.out_dir, a["name"], lang) for lang in LANGUAGES]
        if p.fresh(a["name"], files):
            continue  # a month with no new or changed run: its page is not rendered again
        for lang, path in zip(LANGUAGES, files):
            p.write(path, render_archive(a["month"], a["runs"], a["comparisons"], lang,
                                         show_addresses=p.show_addresses))
    for lang in LANGUAGES:
        p.write(_lang_file(p.out_dir, "index", lang),
                render_index(all_runs[:INDEX_RUNS], lang, comparisons[:INDEX_RUNS], models, bench,
                             archives=archives, model_runs=MODEL_RUNS,
                             older_comparisons=max(0, len(comparisons) - INDEX_RUNS),
                             show_addresses=p.show_addresses))
    p.written += write_home(p.project / "site", lambda lang: render_home(all_runs, lang, comparisons,
                                                                        show_addresses=p.show_addresses))


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
