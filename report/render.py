"""Pages from templates: one Jinja environment, one function per kind of page.

Each ``render_*`` returns the Markdown of one page in one language; none of
them reads the database (the views come in ready, see ``report/views.py``).
Every printed value is escaped for Markdown and HTML unless it is ``MD``
(report/mdsafe.py).

In short, ``render.py``, ``article_parts.py``: the Jinja environment and page renderers;
table cells, caveat boxes, charts, the summary paragraph, the author's notes

In short, ``templates/``: the article prose (``run.md.j2``, ``runs_index.md.j2``,
``runs_archive.md.j2``, ``compare.md.j2``, ``sections/``). The runs index lists the latest
``INDEX_RUNS`` (50) runs and comparisons and each model's latest ``MODEL_RUNS`` (5) runs
(report/build.py; older runs are only counted, ``views.models_across``); with more runs, every run
is on its month's page ``runs/archive-YYYY-MM``, keyed in the manifest so only a month with a new or
changed run is rendered again
"""

from __future__ import annotations

import functools
import re
import shutil
import time
from pathlib import Path

import jinja2

from cardproof.paths import cache_dir

from . import charts
from .axes_charts import axes_charts
from .article_parts import (author_notes, cell_value, exception_groups, merged_caveats, render_caveat, run_charts,
                            summary_paragraph)
from .caveats import caveats_for
from .findings.show import rendered as rendered_findings
from .fingerprints import code_fingerprint
from .history.conditions import describe as describe_difference
from .home import latest_per_campaign
from .i18n import CATALOGUE, Lang
from .mdsafe import MD, esc, markdown_environment, publishing, translator
from .axes import beyond_words, knee_sentence, level_sentence, queueing_sentence
from .observations import template_end_reason, template_say
from .reconcile import reconciliations


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
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
    env.globals["said"] = template_say  # stored observations (message id + values) in the page's language
    env.globals["end_reason"] = template_end_reason  # how a load ended, in the page's language
    env.globals["knee_sentence"] = knee_sentence  # the Load section's and a publication's same words
    env.globals["queueing_sentence"] = queueing_sentence
    env.globals["level_sentence"] = level_sentence  # how far a sweep meets the service level
    env.globals["beyond_words"] = beyond_words
    env.globals["difference"] = _template_difference  # what differs between two runs, in the page's language
    env.bytecode_cache = _bytecode_cache()
    return env


#: a folder of compiled templates unused this long is removed by the next build
_STALE_CACHE_S = 7 * 86400


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates between processes; a cache that cannot be read or written is no cache, never an
    error (Jinja lets some of ``open``'s errors through: a folder that became a file, an I/O error)."""

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            pass  # the template is compiled from its source

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between builds: compiling the templates cost 1 s of every report step.

    One folder per code fingerprint (the templates and the environment's settings are in it; Jinja
    checks its own and Python's version in each file), so a template is never read as compiled by
    other code; folders unused for a week are removed.
    """
    try:
        root = cache_dir()
        folder = root / f"templates-{code_fingerprint()[:16]}"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        now = time.time()
        for other in root.glob("templates-*"):
            if other != folder and now - other.stat().st_mtime > _STALE_CACHE_S:
                shutil.rmtree(other, ignore_errors=True)
        return _TemplateCache(str(folder))
    except OSError:
        return None


@jinja2.pass_context
def _template_ngettext(ctx, singular: str, plural: str, n, **params) -> MD:
    """``ngettext`` in templates, in the page's language (``L``): ``%(num)s`` is ``n``, other params escaped."""
    L = ctx["L"]
    text = L.ngettext(singular, plural, n, **{k: esc(v) for k, v in params.items()})
    return MD(text) if singular in CATALOGUE else esc(text)


@jinja2.pass_context
def _template_difference(ctx, d) -> MD:
    """A difference between two runs (``history.conditions.Difference``) as ``name: before → after``."""
    return describe_difference(d, ctx["L"])


def render_run(view: dict, lang: str, img_dir: Path | None = None, project: Path | None = None, *,
               show_addresses: bool = False) -> str:
    L = Lang(lang)
    tpl = environment().get_template("run.md.j2")
    with publishing(show_addresses=show_addresses):
        return link_evidence(tpl.render(
            notes=author_notes(project, view["run"]["id"], lang),
            lang=lang,
            charts=run_charts(view, L, img_dir),
            axes_charts=axes_charts(view.get("axes"), view["run"]["id"], L, img_dir),
            caveats=merged_caveats(caveats_for(view), L),
            found=rendered_findings(view.get("findings") or [], L),
            summary_said=summary_paragraph(view.get("summary") or [], L),
            reconciled=[render_caveat(c, L) for c in reconciliations(view)],
            _=translator(L.gettext, CATALOGUE),
            L=L,
            cellvalue=lambda c: cell_value(L, c),
            exception_groups=exception_groups(view),
            **view,
        ), view["run"]["id"])


# Anchors that live on a run's evidence page: a link to one from the article goes there.
_EVIDENCE_LINK = re.compile(r"(?<!\\)\]\(#((?:cell|sample|line|lines|load|step)-[A-Za-z0-9_-]+|probe-\d+|probe-exchanges|log-evidence|observed|lines-unattributed)\)")


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
        return environment().get_template("run_evidence.md.j2").render(
            lang=lang, _=translator(L.gettext, CATALOGUE), L=L, **view)


def render_index(runs: list[dict], lang: str, comparisons: list[dict] | None = None,
                 models: list[dict] | None = None, llama_bench: dict | None = None, *,
                 archives: list[dict] | None = None, older_comparisons: int = 0, model_runs: int | None = None,
                 show_addresses: bool = False) -> str:
    """The runs index: ``runs`` (the latest), ``archives`` (month pages, when there are older runs),
    each model's latest ``model_runs`` runs (all when None)."""
    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        return environment().get_template("runs_index.md.j2").render(
            _=translator(L.gettext, CATALOGUE), L=L, runs=runs, comparisons=comparisons or [], models=models or [],
            llama_bench=llama_bench or {"available": False}, archives=archives or [],
            older_comparisons=older_comparisons, model_runs=model_runs)


def render_archive(month: str, runs: list[dict], comparisons: list, lang: str, *,
                   show_addresses: bool = False) -> str:
    """One month's runs and comparisons (runs/archive-YYYY-MM): unchanged once the month is over."""
    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        return environment().get_template("runs_archive.md.j2").render(
            _=translator(L.gettext, CATALOGUE), L=L, month=month, runs=runs, comparisons=comparisons)


#: runs (and comparisons) listed on the home page; every run is on the runs index (report/build.py)
HOME_RUNS = 20


def render_home(runs: list[dict], lang: str, comparisons: list[dict], *, show_addresses: bool = False) -> str:
    """The generated part of the home page (report/home.py)."""
    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        # the latest runs and comparisons; a year of them is on the runs index and its month pages
        return environment().get_template("home.md.j2").render(
            _=translator(L.gettext, CATALOGUE), L=L, runs=runs[:HOME_RUNS], latest=latest_per_campaign(runs),
            comparisons=comparisons[:HOME_RUNS], total_runs=len(runs), total_comparisons=len(comparisons))


def render_compare(cmp: dict, lang: str, img_dir: Path | None = None, *, show_addresses: bool = False) -> str:
    L = Lang(lang)
    chart = None
    with publishing(show_addresses=show_addresses):
        if cmp["rows"]:
            name = f"compare-{cmp['b']['id']}-vs-{cmp['a']['id']}-{lang}.svg"
            if img_dir is not None:
                charts.write_svg(img_dir / name, charts.deviation_chart(cmp["rows"], L))
            chart = f"img/{name}"
        return environment().get_template("compare.md.j2").render(_=translator(L.gettext, CATALOGUE), L=L, cmp=cmp,
                                                           chart=chart)
