"""Typed views: what one run article shows, assembled in one place.

``queries.run_view`` gives the rows of one run (cells, samples, loads,
models, headline) as a dict, the shape every section builder (caveats,
contradictions, lead, decision...) reads. ``ArticleView`` adds the parts
that come from other modules, each a named field; the template receives
``context()``.

In short, ``views.py``: the typed ``ArticleView`` of one article and the "models
across runs" views
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from .axes import axes_view
from .findings import findings_for
from .findings.inputs import gather as finding_inputs
from .fit import fit_view
from .compare import compare_runs
from .contradictions import contradictions_for
from .energy import energy_view
from .evidence import run_evidence
from .expectations import expectations_view
from .gates import gate_summary
from .lead import lead_view
from .memory import memory_view
from .privacy import requests_by_client
from .probes import decision_view
from .provenance import counter_provenance
from .quality import quality_view
from .setup import setup_view
from .summary import summary_lines
from .run_order import order_view


@dataclass
class ArticleView:
    """Everything the article and the evidence page of one run print.

    ``base`` is ``queries.run_view``; the other fields are the sections built
    from it, in the order they are built (a later one may read an earlier).
    """

    base: dict
    gates: list[dict]
    comparison: dict | None
    ratio: dict | None
    memory: dict
    energy: dict  # the Energy section (report/energy.py)
    contradictions: list
    evidence: dict
    lead: dict
    expectations: list[dict]
    decision: dict
    clients: list[dict]
    provenance: list[dict]
    axes: dict  # the Load and Context sections (report/axes.py)
    fit: list  # the fit table of the Context section (report/fit.py)
    quality: dict  # the Quality section: KL divergence beside speed and memory (report/quality.py)
    findings: list  # what the numbers mean (report/findings/), from all of the above
    setup: dict  # the last section, for anyone re-running the run (report/setup.py)
    summary: list  # the conclusion first (report/summary.py): message ids and values, from all of the above
    order: dict  # the order the run measured in and the machine's load (report/run_order.py)

    @property
    def run_id(self) -> int:
        return self.base["run"]["id"]

    def context(self) -> dict:
        """The names the templates use: the run view's keys and one per section."""
        return self.base | {f.name: getattr(self, f.name) for f in fields(self) if f.name != "base"}


def _memory(db, base: dict) -> dict:
    """The run's memory view, each load row with its model's file size (the share table sets card against file)."""
    memory = memory_view(db, base["run"]["id"])
    file_bytes = {m["name"]: m["file_bytes"] for m in base["models"]}
    for row in memory.get("loads", []):
        row["file_bytes"] = file_bytes.get(row["model"])
    return memory


def article_view(db, base: dict, *, previous_id: int | None, ratio: dict | None, views: dict,
                 project: Path | None, show_addresses: bool = False) -> ArticleView:
    """Build every section of one run's article from ``base`` (``queries.run_view``).

    ``previous_id``: the run this one is compared with; ``ratio``: the
    campaign's decode ratio range for the headline's pair (or None);
    ``views``: run views already built (run id -> view), reused by the comparison.
    """
    rid = base["run"]["id"]
    # The section builders read the run as a dict that holds the sections built before them.
    so_far = dict(base)
    so_far["gates"] = gate_summary(db, rid)
    so_far["comparison"] = compare_runs(db, previous_id, rid, views) if previous_id else None
    so_far["ratio"] = ratio
    so_far["memory"] = _memory(db, base)
    so_far["energy"] = energy_view(db, rid)
    so_far["contradictions"] = contradictions_for(db, so_far, project)
    so_far["evidence"] = run_evidence(db, rid)
    so_far["lead"] = lead_view(so_far, so_far["evidence"])
    so_far["expectations"] = expectations_view(db, so_far)
    so_far["decision"] = decision_view(db, rid, view=so_far, memory=so_far["memory"])
    so_far["clients"] = requests_by_client(db, rid, show_addresses=show_addresses)
    so_far["provenance"] = [p for p in counter_provenance(db, rid) if p["source"] != "none"]
    so_far["axes"] = axes_view(db, rid)
    so_far["fit"] = fit_view(db, rid)
    so_far["quality"] = quality_view(db, rid, so_far)
    so_far["findings"] = findings_for(so_far | finding_inputs(db, so_far))
    so_far["order"] = order_view(db, so_far)
    so_far["setup"] = setup_view(db, so_far)
    so_far["summary"] = summary_lines(so_far)
    return ArticleView(base=base, **{f.name: so_far[f.name] for f in fields(ArticleView) if f.name != "base"})


@dataclass
class ClassFigure:
    """One prompt class of one model in one run, as the runs index lists it."""

    cls: str
    decode: object  # Spread or None: the template prints decode.median
    cell: int
    unstable: bool


@dataclass
class ModelRun:
    id: int
    started_at: str
    classes: list[ClassFigure]


@dataclass
class ModelAcrossRuns:
    """A model with the runs that measured it (the runs index's "Models across runs")."""

    name: str
    runs: list[ModelRun]
    #: every run that measured it (``runs`` may hold only the latest of them)
    total: int = 0


def model_figures(view: dict) -> dict[str, list[ClassFigure]]:
    """Per model of one run: its median per prompt class, by the same rule as the run's headline.

    Every class is shown (reasoning off where measured), and an unstable cell
    is marked, not stated as a figure.
    """
    out = {}
    for m in view["models"]:
        per_class = []
        for cls in view["classes"]:
            c = m["cells"].get((cls, False)) or m["cells"].get((cls, True))
            if c:
                per_class.append(ClassFigure(cls, c["decode"], c["id"], bool(c.get("unstable"))))
        out[m["name"]] = per_class
    return out


def models_across(runs: list[dict], figures_of, *, keep: int | None = None,
                  models_of=None) -> list[ModelAcrossRuns]:
    """Each model with the runs that measured it; ``figures_of(run_id)`` gives ``model_figures``.

    ``keep``: each model's first ``keep`` runs (of ``runs`` in their order, newest first on the runs
    index) with their figures, the rest only counted in ``total``; ``models_of(run_id)`` then names a
    run's models, so a run none of whose models needs its figures is not looked into.
    """
    out: dict[str, ModelAcrossRuns] = {}
    for r in runs:
        if keep is not None and models_of is not None:
            names = models_of(r["id"])
            if all(name in out and len(out[name].runs) >= keep for name in names):
                for name in names:
                    out[name].total += 1
                continue
        for name, per_class in figures_of(r["id"]).items():
            entry = out.setdefault(name, ModelAcrossRuns(name, []))
            entry.total += 1
            if keep is None or len(entry.runs) < keep:
                entry.runs.append(ModelRun(r["id"], r["started_at"], per_class))
    return sorted(out.values(), key=lambda e: e.name)
