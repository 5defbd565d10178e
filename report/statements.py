"""What a run article states, kind by kind: each statement's words in every language, and what is compared.

A *statement kind* is a small function of the run's article view (``views.ArticleView.context()``)
that returns, per key, a :class:`Statement`: a label and the words the article states, as each
language shows them, and a ``value`` that says when two statements say the same. ``KINDS`` registers
them all, here and only here: ``cardproof publish`` records every kind's statements and a later build
compares them (report/addenda.py), so adding a kind is adding one entry.

The words are the article's own messages (the templates' ``_()`` strings) as plain text: no emphasis,
no links, names as written. An addendum escapes what it quotes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cardproof.marks import N_
from .axes import knee_sentence, level_sentence
from .i18n import LANGUAGES, Lang

#: the record form of statements made by this code: an older record (no ``form``) compares by ``legacy``
FORM = 2


@dataclass(frozen=True)
class Statement:
    """One thing an article states: ``label`` and ``text`` per language, and the ``value`` compared.

    ``samples``: for a median, the sample ids behind it (an addendum names those that left or joined);
    ``legacy``: what a record made before ``FORM`` held for the same data, where it held something else.
    """

    label: dict[str, str]
    text: dict[str, str]
    value: str
    samples: list[int] | None = None
    legacy: str | None = None


def both(make: Callable[[Lang], str]) -> dict[str, str]:
    """``make`` in every language: language code -> text."""
    return {lang: make(Lang(lang)) for lang in LANGUAGES}


def _reasoning(L: Lang, on) -> str:
    return L.gettext("reasoning on") if on else L.gettext("reasoning off")


# -- the main table: medians and load times -------------------------------------------------------

def _cells(metric: str, digits: int) -> Callable[[dict], dict[str, Statement]]:
    """Each cell's decode or prefill median, rounded as the table shows it, with the samples behind it."""
    what = N_("decode median") if metric == "decode" else N_("prefill median")

    def kind(view: dict) -> dict[str, Statement]:
        out = {}
        for c in view["cells"]:
            sp, on = c[metric], bool(c["reasoning"])
            value = None if sp is None else round(sp.median, digits)
            out[f"{c['model']}|{c['prompt_class']}|{int(on)}"] = Statement(
                label=both(lambda L: f"{c['model']} · {L.gettext(c['prompt_class'])} · {_reasoning(L, on)}: "
                                     f"{L.gettext(what)}"),
                text=both(lambda L: "—" if value is None else f"{L.num(value, digits)} {L.gettext('tok/s')} "
                                                              f"(n={sp.n})"),
                value="—" if value is None else f"{value:.{digits}f}",
                samples=sorted(s["id"] for s in c["valid"]))
        return out
    return kind


def load_times(view: dict) -> dict[str, Statement]:
    """Each model's load time (median over its measured loads), as the table's last column."""
    out = {}
    for m in view["models"]:
        load = None if m["load"] is None else round(m["load"].median, 2)
        out[m["name"]] = Statement(
            label=both(lambda L: f"{m['name']}: {L.gettext('load time')}"),
            text=both(lambda L: "—" if load is None else f"{L.num(load, 2)} s"),
            value="—" if load is None else f"{load:.2f}")
    return out


# -- the Headline -------------------------------------------------------------------------------

def headline(view: dict) -> dict[str, Statement]:
    """Per prompt class, the headline as the article's Headline section states it, word for word.

    An addendum quotes what readers saw: a class the article called "no measurable difference", left
    out as unstable or gave no headline for (the run did not finish) is recorded as that sentence, not
    as a ratio it never stated. The sentences use the template's messages
    (``templates/run.md.j2``, ``sections/headline.md.j2``) without the emphasis; tests/test_publish_
    headline.py holds them to the rendered article. ``value`` is what is compared: the ratio where the
    article stated one, else what kind of sentence it was, so a rounding-level move inside "no
    measurable difference" is no change. ``legacy``: the "best/other ratio" an older record held.
    """
    run, h, classes = view["run"], view["headline"], view["classes"]

    def said(cls: str, value: str, say, legacy: str | None = None) -> Statement:
        return Statement(both(lambda L: f"{L.gettext('Headline')}, {L.gettext(cls)}"), both(say), value,
                         legacy=legacy)

    out: dict[str, Statement] = {}
    if run["status"] != "completed":
        for cls in classes:
            out[cls] = said(cls, "no headline: unfinished", lambda L: L.gettext("No headline: the run did not finish."))
        return out
    if not h:
        if view.get("unstable_cells"):
            for cls in classes:
                out[cls] = said(cls, "no headline: unstable", lambda L: _none_stable(view, L))
        elif classes:
            for cls in classes:
                out[cls] = said(cls, "no headline: no valid sample", lambda L: L.gettext("No valid sample in this run."))
        return out
    agree = h["agree"] and len(h["rows"]) > 1
    for row in h["rows"]:
        cls, best = row["cls"], row["best"]["name"]
        if not row.get("other"):
            out[cls] = said(cls, f"{best} only", lambda L: _row_sentence(row, L))
            continue
        other = row["other"]["name"]
        legacy = f"{best}/{other} {round(row['ratio'], 2):.2f}" if row.get("ratio") is not None else None
        if row["measurable"]:
            value = legacy or f"{best}/{other} —"
        else:  # which of the two came first is no finding where the difference is not measurable
            value = "no measurable difference: " + "/".join(sorted([best, other]))
        say = (lambda L: _agree_sentence(h, L)) if agree else (lambda L: _row_sentence(row, L))
        out[cls] = said(cls, value, say, legacy)
    left_out = {c["prompt_class"] for c in h.get("unstable") or []} - {r["cls"] for r in h["rows"]}
    for cls in [c for c in classes if c in left_out]:
        out[cls] = said(cls, "unstable", lambda L: _left_out_sentence(h, L))
    return out


def _name(m: dict, L: Lang, mark: bool = True) -> str:
    """A model as the headline names it (its production mark where the template's ``bold`` adds one)."""
    return m["name"] + (f" ({L.gettext('pinned')})" if mark and m.get("pinned") else "")


def _pair(r: dict, L: Lang) -> str:
    return f"×{L.num(r['ratio'], 2)} (×{L.num(r['ratio_low'], 2)}–{L.num(r['ratio_high'], 2)})"


def _agree_sentence(h: dict, L: Lang) -> str:
    _ = L.gettext
    head = _("{best} is the fastest on every prompt class, against {other}").format(
        best=_name(h["best"], L), other=_name(h["other"], L))
    rows = ", ".join(f"{_(r['cls'])} {_pair(r, L)}" for r in h["rows"])
    return f"{head}: {rows} — {_('ratio of decode medians; in brackets the range over all sample pairs.')}"


def _row_sentence(r: dict, L: Lang) -> str:
    """One class's line of the headline list (``sections/headline.md.j2``), without its "**class**:"."""
    _ = L.gettext
    best = r["best_cell"]["decode"]
    if not r.get("other"):
        return (f"{r['best']['name']} {L.num(best.median)} {_('tok/s')} — "
                f"{_('the only stable cell of this class: nothing to compare it with')}")
    other = r["other_cell"]["decode"]
    if r["measurable"]:
        return _("{best} {best_tps} tok/s against {other_tps} tok/s for {other}").format(
            best=_name(r["best"], L), best_tps=L.num(best.median), other_tps=L.num(other.median),
            other=_name(r["other"], L)) + f" — {_pair(r, L)}"
    if r["apart"]:
        return _("no measurable difference between {best} ({best_tps} tok/s) and {other} ({other_tps} tok/s): "
                 "their ranges do not overlap, but their samples ({n_best} and {n_other}) differ by less than "
                 "they scatter (Welch's t-test, p = {p})").format(
            best=_name(r["best"], L, False), best_tps=L.num(best.median), other=_name(r["other"], L, False),
            other_tps=L.num(other.median), n_best=L.num(best.n, 0), n_other=L.num(other.n, 0),
            p=L.num(r.get("p"), 3))
    return _("no measurable difference between {best} ({best_tps} tok/s) and {other} ({other_tps} tok/s): "
             "their ranges overlap").format(
        best=_name(r["best"], L, False), best_tps=L.num(best.median), other=_name(r["other"], L, False),
        other_tps=L.num(other.median))


def _left_out_sentence(h: dict, L: Lang) -> str:
    cells = "; ".join(f"{c['model']} · {L.gettext(c['prompt_class'])}" for c in h["unstable"])
    return f"{L.gettext('Left out as unstable:')} {cells}."


def _none_stable(view: dict, L: Lang) -> str:
    _ = L.gettext
    text = _("No headline: no prompt class has stable cells to compare (stable: the fastest decode sample is at "
             "most {limit} times the slowest). The table shows every median, marked where it is unstable.").format(
        limit=L.num(view["unstable_ratio"], 2))
    if view.get("unstable_interval_pct"):
        text += " " + _("A cell is also unstable where the 95 % bootstrap interval of its median is wider than "
                        "±{pct} %.").format(pct=L.num(view["unstable_interval_pct"], 2))
    return text


# -- verdicts: pass rules, probes, expectations --------------------------------------------------

def rule_verdicts(view: dict) -> dict[str, Statement]:
    """Each pass rule's outcome per model as the Decision section states it.

    That is the outcome as shown (``probes.rule_outcomes`` and ``grade_fairly``: a pass by a rule that
    cannot be shown to have stood before the run reads "unverified", an unstable cell's "unstable");
    ``legacy`` is the stored outcome, which a record made before held.
    """
    out = {}
    for r in (view.get("decision") or {}).get("rules", []):
        for m in r["models"]:
            outcome = str(m["outcome"])
            out[f"{r['name']}|{m['model']}"] = Statement(
                label=both(lambda L: f"{L.gettext('Rule')} {r['name']}, {m['model']}"),
                text=both(lambda L: L.gettext(outcome)), value=outcome,
                legacy=None if m.get("stored") is None else str(m["stored"]))
    return out


def probe_verdicts(view: dict) -> dict[str, Statement]:
    """Each probe's verdict per model, as the Decision section's table of probe verdicts states it."""
    out = {}
    for m in (view.get("decision") or {}).get("probes", []):
        for p in m["probes"]:
            said = f"{p['verdict']} {p['passed']}/{p['total']}"
            out[f"{m['model']}|{p['probe']}"] = Statement(
                label=both(lambda L: f"{L.gettext('Probe verdicts')}: {m['model']}, {p['probe']}"),
                text=both(lambda L: said + (f" ({L.gettext('unstable: does not grade the model')})"
                                            if p["unstable"] else "")),
                value=said + (" unstable" if p["unstable"] else ""))
    return out


def expectations(view: dict) -> dict[str, Statement]:
    """Each expectation of the author per model: confirmed, refuted, undecided or unstable."""
    out = {}
    for e in view.get("expectations") or []:
        for m in e["models"]:
            out[f"{e['name']}|{m['model']}"] = Statement(
                label=both(lambda L: f"{L.gettext('What the author expected')}: {e['name']}, {m['model']}"),
                text=both(lambda L: L.gettext(m["verdict"])), value=str(m["verdict"]))
    return out


# -- the Variants section -----------------------------------------------------------------------

def fastest_variant(view: dict) -> dict[str, Statement]:
    """Per base model, class and metric: the candidate measurably ahead of every other, or that none is.

    "No candidate decodes measurably faster than every other" is a statement too: a correction that
    makes one variant measurably faster changes it (``value``: the fastest's name, or "none").
    """
    out = {}
    for g in view.get("variants") or []:
        for pc in g["classes"]:
            for metric in ("decode", "prefill"):
                best = pc.get(f"best_{metric}")
                out[f"{g['base']}|{pc['cls']}|{int(bool(pc['reasoning']))}|{metric}"] = Statement(
                    label=both(lambda L: f"{L.gettext('Variants')}: {g['base']} · {L.gettext(pc['cls'])} · "
                                         f"{_reasoning(L, pc['reasoning'])}"),
                    text=both(lambda L: _fastest_sentence(L, metric, best)),
                    value=best["name"] if best else "none")
    return out


def _fastest_sentence(L: Lang, metric: str, best: dict | None) -> str:
    _ = L.gettext
    if metric == "decode":
        return (_("Fastest decode: {name}, measurably ahead of every other candidate.").format(name=best["name"])
                if best else _("No candidate decodes measurably faster than every other."))
    return (_("Fastest prefill: {name}, measurably ahead of every other candidate.").format(name=best["name"])
            if best else _("No candidate prefills measurably faster than every other."))


# -- the Load sections: knee and service level -------------------------------------------------

_AXIS_TITLE = {"load": "Load: concurrent streams", "rate": "Load: Poisson request rates"}


def _x(value) -> str:
    """A step's place on its axis as compared: streams or a rate, without a float's noise."""
    return format(value, "g") if isinstance(value, (int, float)) else str(value)


def knees(view: dict) -> dict[str, Statement]:
    """Per axis and model, where aggregate throughput stops rising, or that it still rises at the last step."""
    out = {}
    for axis in ("load", "rate"):
        for e in (view.get("axes") or {}).get(axis, []):
            if e["knee"] is None and len(e["rows"]) < 2:
                continue  # one step: the section states no knee either way
            out[f"{axis}|{e['model']}"] = Statement(
                label=both(lambda L: f"{L.gettext(_AXIS_TITLE[axis])}, {e['model']}: {L.gettext('knee')}"),
                text=both(lambda L: _knee_sentence(L, axis, e)),
                value="not compared" if e.get("unequal") else "beyond the sweep" if e["knee"] is None
                else _x(e["knee"]))
    return out


def _knee_sentence(L: Lang, axis: str, e: dict) -> str:
    return str(knee_sentence(L, axis, e))


def service_level(view: dict) -> dict[str, Statement]:
    """Per axis and model, the most streams (or the highest rate) that meets the frozen service level."""
    axes = view.get("axes") or {}
    if not axes.get("slo"):
        return {}
    out = {}
    for axis in ("load", "rate"):
        for e in axes.get(axis, []):
            out[f"{axis}|{e['model']}"] = Statement(
                label=both(lambda L: f"{L.gettext(_AXIS_TITLE[axis])}, {e['model']}: {L.gettext('service level')}"),
                text=both(lambda L: _level_sentence(L, axis, e["best"])),
                value=_x(e["max_at_slo"]))
    return out


def _level_sentence(L: Lang, axis: str, best: dict | None) -> str:
    return level_sentence(L, axis, best)


# -- contradictions, gates, caveats, findings ---------------------------------------------------

def contradictions(view: dict) -> dict[str, Statement]:
    """Each contradiction the article lists, open (both sides) or resolved (its resolution).

    ``value`` is its status and title: one that opens, closes (is no longer detected, or resolved) or
    turns into another gets an addendum; its sides' figures moving does not.
    """
    out = {}
    for c in view.get("contradictions") or []:
        key = c.key
        while key in out:  # two of one detector's kind for one model: both stated, both kept
            key += "+"
        out[key] = Statement(
            label={lang: f"{Lang(lang).gettext('Contradiction')}: {c.title[lang]}" for lang in LANGUAGES},
            text={lang: (Lang(lang).gettext("resolved: {resolution}").format(resolution=c.resolution[lang])
                         if c.status == "resolved" else
                         Lang(lang).gettext("open: {a} — {b}").format(a=c.a.text[lang], b=c.b.text[lang]))
                  for lang in LANGUAGES},
            value=f"{c.status}: {c.title['en']}")
    return out


def gates(view: dict) -> dict[str, Statement]:
    """Each gate as the Gates section states it: where it fired, or that it never fired (and is unproven)."""
    out = {}
    for g in view.get("gates") or []:
        n, judged = g["fired_samples"], g["judged_samples"]
        if n:
            value = "fired on every sample" if n == judged else "fired"
        else:
            value = "never fired: unproven" if g["unproven"] else "never fired"
        out[g["gate"]] = Statement(label=both(lambda L: f"{L.gettext('Gate')} {g['gate']}"),
                                   text=both(lambda L: _gate_sentence(L, g)), value=value)
    return out


def _gate_sentence(L: Lang, g: dict) -> str:
    _ = L.gettext
    n, judged = g["fired_samples"], g["judged_samples"]
    if n:
        if n == judged:
            return f"{_('Where gates fired')}: {_('fired on every measured sample')} ({n}/{judged})"
        return f"{_('Where gates fired')}: {n}/{judged}"
    text = f"{_('Gates that never fired in this run')} — {_(g['canary'])}"
    return text + (f" — {_('unproven: this gate was never seen to fire, so its silence proves nothing')}"
                   if g["unproven"] else "")


def caveats(view: dict) -> dict[str, Statement]:
    """Each caveat rule's box as shown; a rule that cannot judge this view is left out, not fatal."""
    from .article_parts import merged_caveats
    from .caveats import caveats_for

    try:
        found = caveats_for(view)
        boxes = {lang: merged_caveats(found, Lang(lang)) for lang in LANGUAGES}
    except (KeyError, TypeError, ValueError, AttributeError):
        return {}
    out = {}
    for i, box in enumerate(boxes["en"]):
        texts = {lang: " ".join(str(item["text"]) for item in boxes[lang][i]["items"]) for lang in LANGUAGES}
        out[box["rule"]] = Statement(
            label={lang: f"{Lang(lang).gettext('Caveat')}: {boxes[lang][i]['title']}" for lang in LANGUAGES},
            text=texts, value=texts["en"])
    return out


def findings(view: dict) -> dict[str, Statement]:
    """Each finding in its words (report/findings/show.py ``published``): a finding stated, changed or withdrawn."""
    from .findings.show import published

    return {key: Statement(label=f["label"], text=f["shown"], value=f["shown"]["en"])
            for key, f in published(view["findings"]).items()}


#: every kind of statement an article makes, by the prefix of its keys; ``cardproof publish`` records
#: them all and each build compares them (report/addenda.py). A kind's function takes the article view.
KINDS: dict[str, Callable[[dict], dict[str, Statement]]] = {
    "decode": _cells("decode", 1),
    "prefill": _cells("prefill", 0),
    "load": load_times,
    "headline": headline,
    "verdict": rule_verdicts,
    "caveat": caveats,
    "finding": findings,
    "probe": probe_verdicts,
    "expectation": expectations,
    "fastest": fastest_variant,
    "knee": knees,
    "slo": service_level,
    "contradiction": contradictions,
    "gate": gates,
}

#: the kinds a publication recorded before publications named theirs (m025): the figures only
LEGACY_KINDS = frozenset({"decode", "prefill", "load", "headline", "verdict", "caveat", "finding"})


def statements(view: dict) -> dict[str, Statement]:
    """Every statement of the article whose view is ``view``, by ``<kind>:<key>``."""
    return {f"{name}:{key}": s for name, kind in KINDS.items() for key, s in kind(view).items()}
