"""The lead of a run that starts a step on the trend pages says so.

A step is claimed only once the runs after it confirm the new level, so a
run's article learns that it starts one when a later run is stored: the
steps a run starts are part of its article's key (:func:`steps_print`), and
the earlier article is rendered again then.
"""

from __future__ import annotations

import hashlib
import json

from cardproof.marks import N_
from .history.render import METRIC_NAMES, cell_name
from .history.render import runs_of_steps, trend_series
from .i18n import LANGUAGES, Lang
from .mdsafe import MD

#: where the trend pages are, seen from a run article (runs/run-N.md)
_TRENDS = "../trends"


def steps_by_run(db=None, series: list[dict] | None = None) -> dict[int, list[dict]]:
    """Run id -> the steps it starts ({series, step}), with the trend page names the site uses.

    ``series``: the build's :func:`~report.history.render.trend_series`, so the series are computed
    once per build for the leads and the trend pages; without it they are read from ``db``.
    """
    return runs_of_steps(series if series is not None else trend_series(db))


def steps_print(entries: list[dict] | None) -> str:
    """What of a run's steps its lead shows, as a key: changes when a later run confirms or moves a step."""
    if not entries:
        return ""
    facts = sorted(
        [e["series"]["page"], e["series"]["prompt_class"], bool(e["series"]["reasoning"]), e["step"]["metric"],
         e["step"]["before"]["run_id"], round(e["step"]["change"], 4), round(e["step"]["low"], 4),
         round(e["step"]["high"], 4)]
        for e in entries)
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()


def lead_sentences(entries: list[dict] | None, L: Lang) -> list[MD]:
    """One sentence per step the run starts, e.g. 'This run starts a step: decode of X (short · reasoning
    off) fell 12.0 % (9.0–15.0 %) against run 41 — see the trend page.'"""
    out = []
    seen = set()
    for e in sorted(entries or [], key=lambda e: (e["series"]["page"], e["step"]["metric"],
                                                  e["series"]["prompt_class"], bool(e["series"]["reasoning"]))):
        s, st = e["series"], e["step"]
        whole_model = st["metric"] == "load_seconds"  # a load belongs to the model: told once, not per cell
        if whole_model:
            if (s["page"], st["metric"]) in seen:
                continue
            seen.add((s["page"], st["metric"]))
        lo, hi = sorted((abs(st["low"]), abs(st["high"])))
        if whole_model:
            msg = (N_("This run starts a step: {metric} of {model} rose {size} ({low}–{high}) against run {before}"
                      " — see the {trend}.") if st["change"] > 0 else
                   N_("This run starts a step: {metric} of {model} fell {size} ({low}–{high}) against run {before}"
                      " — see the {trend}."))
        else:
            msg = (N_("This run starts a step: {metric} of {model} ({cell}) rose {size} ({low}–{high}) against run "
                      "{before} — see the {trend}.") if st["change"] > 0 else
                   N_("This run starts a step: {metric} of {model} ({cell}) fell {size} ({low}–{high}) against run "
                      "{before} — see the {trend}."))
        before = st["before"]["run_id"]
        out.append(MD(L.gettext(msg)).format(
            metric=L.gettext(METRIC_NAMES[st["metric"]]), model=s["model"], cell=cell_name(s, L),
            size=L.pct(abs(st["change"]), 1), low=L.num(lo * 100, 1), high=L.pct(hi, 1),
            before=MD("[{}](run-{}.md)").format(before, before),
            # the site links page.md in every language; its i18n plugin picks the language's file
            trend=MD("[{}]({}/{}.md)").format(L.gettext("trend page"), _TRENDS, s["page"])))
    return out


def lead_steps(entries: list[dict] | None) -> dict[str, list[MD]]:
    """The sentences in every language, for the article view (``lead.steps[L.code]``)."""
    return {lang: lead_sentences(entries, Lang(lang)) for lang in LANGUAGES}
