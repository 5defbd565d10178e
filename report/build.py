"""Render articles from the store into the MkDocs tree and build the site."""

from __future__ import annotations

import html
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
from .memory import memory_view
from .i18n import LANGUAGES, Lang

_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}|#!])")


class ReportError(Exception):
    """The site could not be built; the message says which step and why."""


def esc(value) -> str:
    """Escape foreign text (model names, log lines, answers) for Markdown+HTML."""
    if value is None:
        return ""
    text = html.escape(str(value), quote=False)
    text = text.replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cardproof.report", "templates"),
        autoescape=False,  # Markdown, not HTML: foreign text goes through |esc
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        # Markdown attribute lists use "{#id}", so Jinja comments get other brackets.
        comment_start_string="{%#",
        comment_end_string="#%}",
    )
    env.filters["esc"] = esc
    return env


def _cellvalue(L: Lang, cell: dict | None) -> str:
    if cell is None:
        return "—"
    d = cell["decode"]
    if d is None:
        if cell["excluded"] and not cell["errors"]:
            gates = sorted({g for x in cell["excluded"] for g in x["excluded_by"]})
            return f"[{L.gettext('excluded')}](#cell-{cell['id']}) ({', '.join(gates)})"
        if not cell["errors"]:
            return "—"
        kinds = {s["error_kind"] for s in cell["errors"]}
        # "crash" only where the server went away; a refused request is an error
        word = "crash" if "connection" in kinds else ("timeout" if kinds == {"timeout"} else "error")
        return f"[{L.gettext(word)}](#cell-{cell['id']})"
    return f"[{L.num(d.median)}](#cell-{cell['id']}) ({L.num(d.low)}–{L.num(d.high)}, n={d.n})"


def render_caveat(c, L: Lang) -> dict:
    """Title and text of a caveat in ``L``'s language, numbers formatted for it."""
    params = {}
    for key, value in c.params.items():
        if isinstance(value, tuple) and value[0] == "pct":
            params[key] = L.pct(value[1], 0)
        elif isinstance(value, tuple) and value[0] == "int":
            params[key] = L.num(value[1], 0)
        elif key == "cls":
            params[key] = esc(L.gettext(value))
        else:
            params[key] = esc(value)
    return {
        "kind": c.kind,
        "title": L.gettext(c.title),
        "text": L.gettext(c.text).format(**params),
        "cells": c.cells,
    }


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
    for reasoning in view["reasoning_modes"]:
        rows = charts.decode_rows(view, L, reasoning)
        if not rows:
            continue
        name = f"run-{rid}-decode-{'on' if reasoning else 'off'}-{L.code}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.decode_chart(rows, L))
        out["decode"].append({"reasoning": reasoning, "file": f"img/{name}", "rows": rows})
    rows = charts.reasoning_rows(view, L)
    if rows:
        name = f"run-{rid}-reasoning-{L.code}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.reasoning_chart(rows, L))
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
            out[part] = p.read_text(encoding="utf-8").strip()
    return out


def render_run(view: dict, lang: str, img_dir: Path | None = None, project: Path | None = None) -> str:
    L = Lang(lang)
    tpl = _env().get_template("run.md.j2")
    return tpl.render(
        notes=_notes(project, view["run"]["id"], lang),
        lang=lang,
        charts=_charts(view, L, img_dir),
        caveats=[render_caveat(c, L) for c in caveats_for(view)],
        _=L.gettext,
        L=L,
        cellvalue=lambda c: _cellvalue(L, c),
        exception_groups=_exception_groups(view),
        **view,
    )


def render_index(runs: list[dict], lang: str, comparisons: list[dict] | None = None,
                 models: list[dict] | None = None) -> str:
    L = Lang(lang)
    return _env().get_template("runs_index.md.j2").render(
        _=L.gettext, L=L, runs=runs, comparisons=comparisons or [], models=models or [])


def render_compare(cmp: dict, lang: str, img_dir: Path | None = None) -> str:
    L = Lang(lang)
    chart = None
    if cmp["rows"]:
        name = f"compare-{cmp['b']['id']}-vs-{cmp['a']['id']}-{lang}.svg"
        if img_dir is not None:
            charts.write_svg(img_dir / name, charts.deviation_chart(cmp["rows"], L))
        chart = f"img/{name}"
    return _env().get_template("compare.md.j2").render(_=L.gettext, L=L, cmp=cmp, chart=chart)


def _models_across(db, all_runs: list[dict]) -> list[dict]:
    """Each model with the runs that measured it and its short-prompt median there."""
    out: dict[str, dict] = {}
    for r in all_runs:
        v = queries.run_view(db, r["id"])
        for m in v["models"]:
            c = m["cells"].get((v["classes"][0], False)) if v["classes"] else None
            entry = out.setdefault(m["name"], {"name": m["name"], "runs": []})
            entry["runs"].append({"id": r["id"], "started_at": r["started_at"],
                                  "cls": v["classes"][0] if v["classes"] else None,
                                  "decode": c["decode"] if c else None, "cell": c["id"] if c else None})
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


def write_articles(db_path: Path, project: Path) -> list[Path]:
    """Write every run article in both languages; returns the files written."""
    store = open_store(db_path, create=False)
    try:
        all_runs = queries.runs(store.db)
        for r in all_runs:
            r["n_models"] = store.db.execute(
                "select count(distinct model_id) from cells where run_id = ?", [r["id"]]
            ).fetchone()[0]
        out_dir = project / "site" / "runs"
        cmp_dir = project / "site" / "compare"
        for d in (out_dir, cmp_dir):
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
        comparisons = []
        for r in all_runs:
            prev = previous_run(store.db, r)
            if prev is not None:
                comparisons.append(compare_runs(store.db, prev, r["id"]))
        by_b = {c["b"]["id"]: c for c in comparisons}
        models = _models_across(store.db, all_runs)
        written = []
        for lang in LANGUAGES:
            suffix = "" if lang == "en" else f".{lang}"
            p = out_dir / f"index{suffix}.md"
            p.write_text(render_index(all_runs, lang, comparisons, models))
            written.append(p)
            for r in all_runs:
                view = queries.run_view(store.db, r["id"])
                view["gates"] = gate_summary(store.db, r["id"])
                view["comparison"] = by_b.get(r["id"])
                view["ratio"] = _headline_ratio_range(store.db, view)
                view["contradictions"] = contradictions_for(store.db, view, project)
                view["memory"] = memory_view(store.db, r["id"])
                p = out_dir / f"run-{r['id']}{suffix}.md"
                p.write_text(render_run(view, lang, out_dir / "img", project))
                written.append(p)
            for c in comparisons:
                p = cmp_dir / f"run-{c['b']['id']}-vs-{c['a']['id']}{suffix}.md"
                p.write_text(render_compare(c, lang, cmp_dir / "img"))
                written.append(p)
        return written
    finally:
        store.close()


def _headline_ratio_range(db, view: dict) -> dict | None:
    h = view["headline"]
    if not h or not h.get("other"):
        return None
    rr = ratio_range(db, view["run"]["campaign_name"], h["best"]["name"], h["other"]["name"], h["cls"])
    return rr | {"a": h["best"]["name"], "b": h["other"]["name"]} if rr else None


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
        for index in out.rglob("index.html"):
            dst = index.parent / "sitemap.xml"
            if not dst.exists():
                shutil.copy(sitemap, dst)
    return out


def build(db_path: Path, project: Path, *, run_mkdocs: bool = True) -> dict:
    """Scaffold if needed, write articles, build. Returns paths for the CLI to print."""
    scaffold(project)
    try:
        written = write_articles(db_path, project)
    except AuthoredError as exc:
        raise ReportError(str(exc)) from exc
    out = mkdocs_build(project) if run_mkdocs else None
    return {"articles": written, "site_dir": out}
