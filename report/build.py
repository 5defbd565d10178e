"""Render articles from the store into the MkDocs tree and build the site."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jinja2

from cardproof.daemon.store import open_store

from . import charts, queries
from .caveats import caveats_for
from .contradictions import contradictions_for
from .contradictions.authored import AuthoredError
from .compare import compare_runs, previous_run, ratio_range
from .gates import gate_summary
from .evidence import run_evidence
from .home import latest_per_campaign, write_home
from .expectations import expectations_view
from .lead import lead_view
from .reconcile import reconciliations
from .memory import memory_view
from .privacy import requests_by_client
from .probes import decision_view
from .provenance import counter_provenance
from .llama_bench import llama_bench_view
from .i18n import CATALOGUE, LANGUAGES, Lang
# esc and code_span are imported from here by other modules
from .mdsafe import MD, code_span, esc, markdown_environment, publishing, translator  # noqa: F401
from .tolerance import shielded


class ReportError(Exception):
    """The site could not be built; the message says which step and why."""


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    """One environment for the process: it caches compiled templates."""
    # every printed value is escaped for Markdown+HTML unless it is MD (report/mdsafe.py)
    env = markdown_environment(
        jinja2.PackageLoader("cardproof.report", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        # Markdown attribute lists use "{#id}", so Jinja comments get other brackets.
        comment_start_string="{%#",
        comment_end_string="#%}",
    )
    env.globals["ngettext"] = _template_ngettext
    return env


@jinja2.pass_context
def _template_ngettext(ctx, singular: str, plural: str, n, **params) -> MD:
    """``ngettext`` in templates, in the page's language (``L``): ``%(num)s`` is ``n``, other params escaped."""
    L = ctx["L"]
    text = L.ngettext(singular, plural, n, **{k: esc(v) for k, v in params.items()})
    return MD(text) if singular in CATALOGUE else esc(text)


def _cellvalue(L: Lang, cell: dict | None) -> MD:
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
        if isinstance(value, tuple) and value[0] == "pct":
            params[key] = L.pct(value[1], 0)
        elif isinstance(value, tuple) and value[0] == "int":
            params[key] = L.num(value[1], 0)
        elif isinstance(value, tuple) and value[0] == "num2":
            params[key] = L.num(value[1], 2)
        elif isinstance(value, tuple) and value[0] == "cells":
            # model · class (· reasoning on), escaped part by part
            params[key] = MD("; ").join(
                MD("{} · {}{}").format(model, _(cls), MD(" · ") + _("reasoning on") if r else MD(""))
                for model, cls, r in value[1])
        elif key == "cls":
            params[key] = _(value)
        else:
            params[key] = value
    return {
        "kind": c.kind,
        "title": _(c.title),
        "text": _(c.text).format(**params),
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


def _exception_groups(view: dict) -> list[dict]:
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


def _charts(view: dict, L: Lang, img_dir: Path | None) -> dict:
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
    from .findings import reasoning_pairs

    out["reasoning_left_out"] = reasoning_pairs(view)[1]
    rows = charts.reasoning_rows(view, L)
    if rows:
        name = f"run-{rid}-reasoning-{L.code}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.reasoning_chart(rows, L, title=L.gettext("Decode change with reasoning on")))
        out["reasoning"] = {"file": f"img/{name}", "rows": rows}
    return out


def _notes(project: Path | None, run_id: int, lang: str) -> dict:
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


def render_run(view: dict, lang: str, img_dir: Path | None = None, project: Path | None = None, *,
               show_addresses: bool = False) -> str:
    L = Lang(lang)
    tpl = _env().get_template("run.md.j2")
    with publishing(show_addresses=show_addresses):
        return link_evidence(tpl.render(
            notes=_notes(project, view["run"]["id"], lang),
            lang=lang,
            charts=_charts(view, L, img_dir),
            caveats=merged_caveats(caveats_for(view), L),
            reconciled=[render_caveat(c, L) for c in reconciliations(view)],
            _=translator(L.gettext, CATALOGUE),
            L=L,
            cellvalue=lambda c: _cellvalue(L, c),
            exception_groups=_exception_groups(view),
            **view,
        ), view["run"]["id"])


# Anchors that live on a run's evidence page: a link to one from the article goes there.
_EVIDENCE_LINK = re.compile(r"(?<!\\)\]\(#((?:cell|sample|line|lines|load)-[A-Za-z0-9_-]+|probe-\d+|probe-exchanges|log-evidence|observed|lines-unattributed)\)")


def link_evidence(markdown: str, run_id: int) -> MD:
    """The article's links into its evidence, pointed at the evidence page.

    Only our own Markdown can contain ``](#``: foreign text has its brackets
    escaped, so the rewrite never touches what a server or a log wrote.
    """
    return MD(_EVIDENCE_LINK.sub(lambda m: f"](run-{run_id}-evidence.md#{m.group(1)})", markdown))


def render_evidence(view: dict, lang: str, *, show_addresses: bool = False) -> str:
    """The evidence page of one run: samples (median marked), canary samples, log lines by load."""
    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        return _env().get_template("run_evidence.md.j2").render(
            lang=lang, _=translator(L.gettext, CATALOGUE), L=L, **view)


def render_index(runs: list[dict], lang: str, comparisons: list[dict] | None = None,
                 models: list[dict] | None = None, llama_bench: dict | None = None, *,
                 show_addresses: bool = False) -> str:
    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        return _env().get_template("runs_index.md.j2").render(
            _=translator(L.gettext, CATALOGUE), L=L, runs=runs, comparisons=comparisons or [], models=models or [],
            llama_bench=llama_bench or {"available": False})


def render_home(runs: list[dict], lang: str, comparisons: list[dict], *, show_addresses: bool = False) -> str:
    """The generated part of the home page (report/home.py)."""
    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        return _env().get_template("home.md.j2").render(
            _=translator(L.gettext, CATALOGUE), L=L, runs=runs, latest=latest_per_campaign(runs),
            comparisons=comparisons)


def render_compare(cmp: dict, lang: str, img_dir: Path | None = None, *, show_addresses: bool = False) -> str:
    L = Lang(lang)
    chart = None
    with publishing(show_addresses=show_addresses):
        if cmp["rows"]:
            name = f"compare-{cmp['b']['id']}-vs-{cmp['a']['id']}-{lang}.svg"
            if img_dir is not None:
                charts.write_svg(img_dir / name, charts.deviation_chart(cmp["rows"], L))
            chart = f"img/{name}"
        return _env().get_template("compare.md.j2").render(_=translator(L.gettext, CATALOGUE), L=L, cmp=cmp,
                                                           chart=chart)


def _models_across(db, all_runs: list[dict], view_of=None) -> list[dict]:
    """Each model with the runs that measured it and its median per prompt class there.

    The same rule as a run's headline: every class is shown (reasoning off
    where measured), and an unstable cell is marked, not stated as a figure.
    """
    out: dict[str, dict] = {}
    for r in all_runs:
        v = view_of(r["id"]) if view_of else queries.run_view(db, r["id"])
        for m in v["models"]:
            per_class = []
            for cls in v["classes"]:
                c = m["cells"].get((cls, False)) or m["cells"].get((cls, True))
                if c:
                    per_class.append({"cls": cls, "decode": c["decode"], "cell": c["id"],
                                      "unstable": bool(c.get("unstable"))})
            entry = out.setdefault(m["name"], {"name": m["name"], "runs": []})
            entry["runs"].append({"id": r["id"], "started_at": r["started_at"], "classes": per_class})
    return sorted(out.values(), key=lambda e: e["name"])


def scaffold(project: Path) -> None:
    """Give ``project`` an mkdocs.yml and hand-written pages if it has none."""
    project.mkdir(parents=True, exist_ok=True)
    src = resources.files("cardproof.report") / "scaffold"
    if not (project / "mkdocs.yml").exists():
        (project / "mkdocs.yml").write_text((src / "mkdocs.yml").read_text())
    site = project / "site"
    site.mkdir(exist_ok=True)
    for name in ("index.md", "index.de.md"):
        if not (site / name).exists():
            (site / name).write_text((src / name).read_text())
    # Ours, not the author's: always the current copies (mkdocs.yml names them).
    for name in ("iframe-worker.js", "cardproof.css"):
        dst = site / "assets" / "cardproof" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        text = (src / name).read_text()
        if not dst.exists() or dst.read_text() != text:
            dst.write_text(text)


MANIFEST = ".cardproof-build.json"


def _code_fingerprint() -> str:
    """Templates, catalogues and the package version: a change re-renders everything."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    defects = Path(str(resources.files("cardproof.daemon.probes") / "defects.toml"))
    for p in sorted([*root.glob("templates/**/*.j2"), *root.glob("messages/*.py"), *root.glob("*.py"),
                     *root.glob("caveats/*.py"), *root.glob("contradictions/*.py"),
                     *([defects] if defects.exists() else [])]):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _run_fingerprint(db, run: dict, project: Path, code: str) -> str:
    """Cheap summary of everything a run article is made from."""
    h = hashlib.sha256(code.encode())
    h.update(json.dumps(run, sort_keys=True, default=str).encode())
    for table, col in (("samples", "run_id"), ("loads", "run_id"), ("cells", "run_id"), ("canaries", "run_id"),
                       ("memory_samples", "run_id"), ("log_lines", "run_id"), ("probe_results", "run_id"),
                       ("rule_results", "run_id")):
        if table in db.table_names():
            h.update(str(db.execute(f"select count(*), max(id) from {table} where {col} = ?", [run["id"]]).fetchone()).encode())
    h.update(str(db.execute("select count(*), max(gate_results.id), sum(fired) from gate_results join samples on "
                            "samples.id = sample_id where samples.run_id = ?", [run["id"]]).fetchone()).encode())
    if "facts" in db.table_names():
        h.update(str(db.execute("select count(*), max(id) from facts where load_id in "
                                "(select id from loads where run_id = ?)", [run["id"]]).fetchone()).encode())
    for note in sorted((project / "notes").glob(f"run-{run['id']}.*")) if (project / "notes").is_dir() else []:
        h.update(note.name.encode())
        h.update(note.read_bytes())
    return h.hexdigest()


def write_articles(db_path: Path, project: Path, *, progress=None, show_addresses: bool = False) -> list[Path]:
    """Write every run article in both languages; returns the files (re)written.

    Incremental: a run whose data, notes and comparison partner are unchanged
    since the last build (per the manifest beside the articles) is not
    rendered again. Index pages are always rewritten.
    """
    store = open_store(db_path, mode="ro")  # the report only reads
    try:
        # damaged rows: named on stderr and read as NULL, the build goes on
        with shielded(store), charts.deferred():
            written, keys, manifest_path = _write_articles(store, project, progress, show_addresses)
        # only once every chart exists may the manifest call these articles fresh
        manifest_path.write_text(json.dumps(keys, indent=1, sort_keys=True))
        return written
    finally:
        store.close()


def _write_articles(store, project: Path, progress, show_addresses: bool) -> list[Path]:
    if True:
        db = store.db
        all_runs = queries.runs(db)
        for r in all_runs:
            r["n_models"] = db.execute(
                "select count(distinct model_id) from cells where run_id = ?", [r["id"]]
            ).fetchone()[0]
        out_dir = project / "site" / "runs"
        cmp_dir = project / "site" / "compare"
        for d in (out_dir, cmp_dir):
            d.mkdir(parents=True, exist_ok=True)
        manifest_path = project / "site" / MANIFEST
        try:
            old = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            old = {}
        code = _code_fingerprint() + ("+addresses" if show_addresses else "")
        prints = {r["id"]: _run_fingerprint(db, r, project, code) for r in all_runs}
        prev = {r["id"]: previous_run(db, r) for r in all_runs}
        # a run article also shows its comparison and the campaign-wide ratio range
        campaign_print = {}
        for r in all_runs:
            campaign_print.setdefault(r["campaign_name"], hashlib.sha256())
            campaign_print[r["campaign_name"]].update(prints[r["id"]].encode())
        keys = {}
        for r in all_runs:
            p_id = prev[r["id"]]
            keys[f"run-{r['id']}"] = hashlib.sha256(
                (prints[r["id"]] + (prints.get(p_id, "") if p_id else "")
                 + campaign_print[r["campaign_name"]].hexdigest()).encode()).hexdigest()
            if p_id:
                keys[f"run-{r['id']}-vs-{p_id}"] = hashlib.sha256((prints[r["id"]] + prints[p_id]).encode()).hexdigest()
        views: dict[int, dict] = {}

        def view_of(rid: int) -> dict:
            if rid not in views:
                views[rid] = queries.run_view(db, rid)
            return views[rid]

        def fresh(key: str, files: list[Path]) -> bool:
            return old.get(key) == keys[key] and all(f.exists() for f in files)

        written = []
        total = len(all_runs)
        for i, r in enumerate(all_runs, 1):
            key = f"run-{r['id']}"
            files = [out_dir / f"{key}{'' if lang == 'en' else '.' + lang}.md" for lang in LANGUAGES]
            ev_files = [out_dir / f"{key}-evidence{'' if lang == 'en' else '.' + lang}.md" for lang in LANGUAGES]
            if fresh(key, files + ev_files):
                continue
            view = view_of(r["id"])
            view["gates"] = gate_summary(db, r["id"])
            view["comparison"] = compare_runs(db, prev[r["id"]], r["id"], views) if prev[r["id"]] else None
            h = view["headline"]
            if h and h.get("other") and r["status"] == "completed":  # an unfinished run gets no headline
                rr = ratio_range(db, r["campaign_name"], h["best"]["name"], h["other"]["name"], h["cls"], views)
                view["ratio"] = rr | {"a": h["best"]["name"], "b": h["other"]["name"]} if rr else None
            else:
                view["ratio"] = None
            view["memory"] = memory_view(db, r["id"])
            file_bytes = {m["name"]: m["file_bytes"] for m in view["models"]}
            for row in view["memory"].get("loads", []):  # the share table sets the card against the file
                row["file_bytes"] = file_bytes.get(row["model"])
            view["contradictions"] = contradictions_for(db, view, project)
            view["evidence"] = run_evidence(db, r["id"])
            view["lead"] = lead_view(view, view["evidence"])
            view["expectations"] = expectations_view(db, view)
            view["decision"] = decision_view(db, r["id"], view=view, memory=view["memory"])
            view["clients"] = requests_by_client(db, r["id"], show_addresses=show_addresses)
            view["provenance"] = [p for p in counter_provenance(db, r["id"]) if p["source"] != "none"]
            for lang, path, ev_path in zip(LANGUAGES, files, ev_files):
                path.write_text(render_run(view, lang, out_dir / "img", project, show_addresses=show_addresses))
                ev_path.write_text(render_evidence(view, lang, show_addresses=show_addresses))
                written += [path, ev_path]
            if progress:
                progress(f"[{i}/{total}] run {r['id']} rendered")
        comparisons = []
        for r in all_runs:
            p_id = prev[r["id"]]
            if p_id is None:
                continue
            key = f"run-{r['id']}-vs-{p_id}"
            files = [cmp_dir / f"{key}{'' if lang == 'en' else '.' + lang}.md" for lang in LANGUAGES]
            cmp = None
            if not fresh(key, files):
                cmp = compare_runs(db, p_id, r["id"], views)
                for lang, path in zip(LANGUAGES, files):
                    path.write_text(render_compare(cmp, lang, cmp_dir / "img", show_addresses=show_addresses))
                    written.append(path)
            comparisons.append(cmp or compare_runs(db, p_id, r["id"], views))
        # unfinished runs stay out of every cross-run figure; their own articles still show what they stored
        models = _models_across(db, [r for r in all_runs if r["status"] == "completed"], view_of)
        for r in all_runs:  # the index states each finished run's headline by the article's rule
            r["headline"] = view_of(r["id"])["headline"] if r["status"] == "completed" else None
        bench = llama_bench_view(db)
        for lang in LANGUAGES:
            p = out_dir / f"index{'' if lang == 'en' else '.' + lang}.md"
            p.write_text(render_index(all_runs, lang, comparisons, models, bench, show_addresses=show_addresses))
            written.append(p)
        written += write_home(project / "site", lambda lang: render_home(all_runs, lang, comparisons,
                                                                        show_addresses=show_addresses))
        from .observed import write_log_articles  # server logs imported with no run (issue 15)
        written += write_log_articles(db, project, show_addresses=show_addresses)
        _remove_stale(out_dir, cmp_dir, keys)
        return written, keys, manifest_path


def _remove_stale(out_dir: Path, cmp_dir: Path, keys: dict) -> None:
    """Articles (and their charts) of runs no longer in the database go away."""
    for d in (out_dir, cmp_dir):
        for f in d.glob("run-*.md"):
            if f.name.split(".")[0].removesuffix("-evidence") not in keys:
                f.unlink()
        for f in (d / "img").glob("*.svg") if (d / "img").is_dir() else []:
            stem = f.stem.rsplit("-", 1)[0]
            base = "-".join(stem.split("-")[:2]) if d == out_dir else stem.replace("compare-", "run-")
            if base not in keys:
                f.unlink()


def mkdocs_build(project: Path) -> Path:
    """``mkdocs build --strict``; raises ReportError with mkdocs' own complaint."""
    project = Path(project).resolve()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(project / "mkdocs.yml")],
        cwd=project,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "WARNING" in ln or "ERROR" in ln]
        detail = "; ".join(lines[:5]) or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReportError(f"mkdocs build --strict failed: {detail}")
    out = project / "build" / "site"
    # static-i18n gives Material per-page alternate links, and Material's
    # language selector fetches sitemap.xml relative to them; without a copy
    # beside each page every switch logs a 404 in the reader's console.
    sitemap = out / "sitemap.xml"
    if sitemap.exists():
        for folder in {page.parent for page in out.rglob("*.html")}:
            dst = folder / "sitemap.xml"
            if not dst.exists():
                shutil.copy(sitemap, dst)
    return out


def build(db_path: Path, project: Path, *, run_mkdocs: bool = True, show_addresses: bool = False) -> dict:
    """Scaffold if needed, write articles, build. Returns paths for the CLI to print."""
    scaffold(project)
    try:
        written = write_articles(db_path, project, show_addresses=show_addresses)
    except AuthoredError as exc:
        raise ReportError(str(exc)) from exc
    out = mkdocs_build(project) if run_mkdocs else None
    return {"articles": written, "site_dir": out}
