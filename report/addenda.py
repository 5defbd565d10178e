"""Corrections stay visible: what a publication put out, and an *Addenda* section where it changed since.

``cardproof publish`` records, for every finished run, the figures its article
states (:func:`figures`): the headline per prompt class (the sentence the
article stated: a ratio, "no measurable difference", left out as unstable, or no
headline because the run did not finish), each cell's
decode and prefill median (rounded as the table shows them, with the sample
ids behind them), each model's load time, each rule's verdict, each caveat and
each finding, as each language showed them. Every build compares the run's publications in
order, and the last one with what the database says now; a figure that
changed gets an entry in the article's *Addenda*: what was published, what
replaced it, when, and why -- the author's note given to the publication that
changed it, or, for a median, the samples that left or joined it.

Labels and values are stored as shown in each language, so an addendum quotes
exactly what readers saw; a figure no longer stated is said to be withdrawn.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import sqlite_utils

from . import queries
from .i18n import LANGUAGES, Lang
from ..daemon.store import json_text
from ..daemon.storefile import connect_readonly

_ADDENDA_MARK = '<span id="addenda"></span>'
_SECTION = re.compile(r"\n\n## [^\n]*\{#addenda\}\n\n" + re.escape(_ADDENDA_MARK) + r".*\Z", re.S)


def _both(make) -> dict[str, str]:
    return {lang: make(Lang(lang)) for lang in LANGUAGES}


def _cell_label(L: Lang, kind: str, model: str, cls: str, reasoning: bool) -> str:
    _ = L.gettext
    what = _("decode median") if kind == "decode" else _("prefill median")
    return f"{model} · {_(cls)} · {_('reasoning on') if reasoning else _('reasoning off')}: {what}"


def figures(db: sqlite_utils.Database, run_id: int) -> dict[str, dict]:
    """The figures the run's article states, by key: ``value`` (compared), ``label``/``shown`` per language."""
    view = queries.run_view(db, run_id)
    out: dict[str, dict] = {}
    for c in view["cells"]:
        reasoning = bool(c["reasoning"])
        for kind, digits in (("decode", 1), ("prefill", 0)):
            sp = c[kind]
            value = None if sp is None else round(sp.median, digits)
            out[f"{kind}:{c['model']}|{c['prompt_class']}|{int(reasoning)}"] = {
                "value": "—" if value is None else f"{value:.{digits}f}",
                "label": _both(lambda L: _cell_label(L, kind, c["model"], c["prompt_class"], reasoning)),
                "shown": _both(lambda L: "—" if value is None else f"{L.num(value, digits)} {L.gettext('tok/s')} "
                                                                  f"(n={sp.n})"),
                "samples": sorted(s["id"] for s in c["valid"]),
            }
    for m in view["models"]:
        load = None if m["load"] is None else round(m["load"].median, 2)
        out[f"load:{m['name']}"] = {
            "value": "—" if load is None else f"{load:.2f}",
            "label": _both(lambda L: f"{m['name']}: {L.gettext('load time')}"),
            "shown": _both(lambda L: "—" if load is None else f"{L.num(load, 2)} s"),
        }
    out.update(headline_figures(view))
    if "rule_results" in db.table_names():
        for r in db.query("""select rule_results.rule_name, rule_results.outcome, models.name as model
                             from rule_results join models on models.id = rule_results.model_id
                             where run_id = ? order by rule_results.id""", [run_id]):
            out[f"verdict:{r['rule_name']}|{r['model']}"] = {
                "value": str(r["outcome"]),
                "label": _both(lambda L: f"{L.gettext('Rule')} {r['rule_name']}, {r['model']}"),
                "shown": _both(lambda L: L.gettext(str(r["outcome"]))),
            }
    out.update(_caveats(view))
    from .findings.show import published as published_findings  # late: the findings read the whole run

    out.update(published_findings(db, view))
    return out


#: a headline figure's ``form``: 2 records the sentence the article stated; a record without it (made
#: before) stated "best ×ratio against other" whether or not the article called the difference measurable
HEADLINE_FORM = 2


def headline_figures(view: dict) -> dict[str, dict]:
    """Per prompt class, the headline as the article's Headline section states it, word for word.

    An addendum quotes what readers saw: a class the article called "no measurable difference", left
    out as unstable or gave no headline for (the run did not finish) is recorded as that sentence, not
    as a ratio it never stated. The sentences use the template's messages
    (``templates/run.md.j2``, ``sections/headline.md.j2``) without the emphasis; tests/test_publish_
    headline.py holds them to the rendered article. ``value`` is what is compared: the ratio where the
    article stated one, else what kind of sentence it was, so a rounding-level move inside "no
    measurable difference" is no change.
    """
    run, h, classes = view["run"], view["headline"], view["classes"]

    def figure(cls: str, value: str, say, legacy: str | None = None) -> dict:
        f = {"value": value, "form": HEADLINE_FORM,
             "label": _both(lambda L: f"{L.gettext('Headline')}, {L.gettext(cls)}"), "shown": _both(say)}
        return f | ({"legacy": legacy} if legacy else {})

    out: dict[str, dict] = {}
    if run["status"] != "completed":
        for cls in classes:
            out[f"headline:{cls}"] = figure(cls, "no headline: unfinished",
                                            lambda L: L.gettext("No headline: the run did not finish."))
        return out
    if not h:
        if view.get("unstable_cells"):
            for cls in classes:
                out[f"headline:{cls}"] = figure(cls, "no headline: unstable", lambda L: _none_stable(view, L))
        elif classes:
            for cls in classes:
                out[f"headline:{cls}"] = figure(cls, "no headline: no valid sample",
                                                lambda L: L.gettext("No valid sample in this run."))
        return out
    agree = h["agree"] and len(h["rows"]) > 1
    for row in h["rows"]:
        cls = row["cls"]
        best = row["best"]["name"]
        if not row.get("other"):
            out[f"headline:{cls}"] = figure(cls, f"{best} only", lambda L: _row_sentence(row, L))
            continue
        other = row["other"]["name"]
        legacy = f"{best}/{other} {round(row['ratio'], 2):.2f}" if row.get("ratio") is not None else None
        if row["measurable"]:
            value = legacy or f"{best}/{other} —"
        else:  # which of the two came first is no finding where the difference is not measurable
            value = "no measurable difference: " + "/".join(sorted([best, other]))
        say = (lambda L: _agree_sentence(h, L)) if agree else (lambda L: _row_sentence(row, L))
        out[f"headline:{cls}"] = figure(cls, value, say, legacy)
    left_out = {c["prompt_class"] for c in h.get("unstable") or []} - {r["cls"] for r in h["rows"]}
    for cls in [c for c in classes if c in left_out]:
        out[f"headline:{cls}"] = figure(cls, "unstable", lambda L: _left_out_sentence(h, L))
    return out


def _name(m: dict, L: Lang, mark: bool = True) -> str:
    """A model as the headline names it (its production mark where the template's ``bold`` adds one)."""
    return m["name"] + (f" ({L.gettext('in production')})" if mark and m.get("pinned") else "")


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


def _caveats(view: dict) -> dict[str, dict]:
    """Each caveat rule's boxes as shown; a rule that cannot judge this view is left out, not fatal."""
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
        out[f"caveat:{box['rule']}"] = {
            "value": texts["en"],
            "label": {lang: f"{Lang(lang).gettext('Caveat')}: {boxes[lang][i]['title']}" for lang in LANGUAGES},
            "shown": texts,
        }
    return out


def record_publication(db: sqlite_utils.Database, *, note: str | None = None, version: str = "") -> int:
    """A publication of every finished run's figures, now; returns its id.

    Finished: completed, and also interrupted or failed (by the effective status readers see): their
    articles are published too, and say "No headline: the run did not finish", which is what a later
    addendum must quote. A run still running (or not heard from) states nothing final yet.
    """
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    runs = sorted(r["id"] for r in queries.runs(db) if r["status"] not in ("running", "stale"))
    rows = []
    for run_id in runs:
        for key, f in figures(db, run_id).items():
            rows.append({"run_id": run_id, "key": key, "value": f["value"],
                         "shown_json": json_text({k: f[k] for k in ("label", "shown", "samples", "form")
                                                  if k in f}, ensure_ascii=False)})
    with db.conn:
        pub = db["publications"].insert({"published_at": at, "note": (note or "").strip() or None,
                                         "cardproof_version": version}).last_pk
        db["published_figures"].insert_all([r | {"publication_id": pub} for r in rows])
    return pub


def _published(db: sqlite_utils.Database, run_id: int) -> list[dict]:
    """The run's publications in order: ``at``, ``note``, ``figures`` (key -> stored figure)."""
    if "published_figures" not in db.table_names():
        return []
    pubs: dict[int, dict] = {}
    for r in db.query("""select publications.id, publications.published_at, publications.note, key, value, shown_json
                         from published_figures join publications on publications.id = publication_id
                         where run_id = ? order by publications.id, published_figures.id""", [run_id]):
        pub = pubs.setdefault(r["id"], {"at": r["published_at"], "note": r["note"], "figures": {}})
        try:
            shown = json.loads(r["shown_json"] or "{}")
        except ValueError:
            shown = {}
        pub["figures"][r["key"]] = {"value": r["value"], **(shown if isinstance(shown, dict) else {})}
    return list(pubs.values())


def addenda(db: sqlite_utils.Database, run_id: int) -> list[dict]:
    """Every published figure of the run that a later publication, or the database now, states otherwise."""
    states = _published(db, run_id)
    if not states:
        return []
    now = figures(db, run_id)
    last = states[-1]["figures"]
    if any(not _same(k, last[k], f) for k, f in now.items() if k in last) or set(last) - set(now):
        states.append({"at": None, "note": None, "figures": now})  # not yet published: this build
    out = []
    for before, after in zip(states, states[1:]):
        for key, was in before["figures"].items():
            new = after["figures"].get(key)
            if _same(key, was, new):
                continue
            out.append({"key": key, "was": was, "now": new, "published_at": before["at"],
                        "changed_at": after["at"], "note": after["note"], "samples": _sample_change(was, new)})
    return out


def _same(key: str, was: dict, new: dict | None) -> bool:
    """Whether ``new`` states what ``was`` stated.

    A headline recorded before its sentence was (no ``form``) holds "best/other ratio" whatever the
    article said: it is the same where the data still gives that ratio (``legacy``), so a store
    published by an older cardproof gets no addendum from the change of record alone.
    """
    if new is None:
        return False
    if new["value"] == was.get("value"):
        return True
    return key.startswith("headline:") and "form" not in was and new.get("legacy") == was.get("value")


def _sample_change(was: dict, new: dict | None) -> dict | None:
    """For a median: the sample ids that left it and those that joined it."""
    if new is None or "samples" not in was or "samples" not in new:
        return None
    old_ids, new_ids = set(was["samples"]), set(new["samples"])
    if old_ids == new_ids:
        return None
    return {"left": sorted(old_ids - new_ids), "joined": sorted(new_ids - old_ids)}


def addenda_section(entries: list[dict], L: Lang) -> str:
    """The *Addenda* section of an article in ``L``'s language; empty when nothing published changed.

    Labels, values and the author's note are escaped like any text from the store (a merged
    database may hold anything); the sample links are ours.
    """
    from .mdsafe import esc

    if not entries:
        return ""
    _ = L.gettext
    lines = [f"\n\n## {_('Addenda')} {{#addenda}}\n\n{_ADDENDA_MARK}"
             + _("Figures published earlier that the data now states otherwise; the published value stays "
                 "here.") + "\n"]
    for e in entries:
        label = esc((e["was"].get("label") or {}).get(L.code) or e["key"])
        was = esc((e["was"].get("shown") or {}).get(L.code) or e["was"]["value"])
        if e["now"] is None:
            now = _("withdrawn: no longer stated")
        else:
            now = str(esc((e["now"].get("shown") or {}).get(L.code) or e["now"]["value"]))
        when = L.datetime(e["changed_at"]) if e["changed_at"] else _("this build, not yet published")
        if e["note"]:
            why = str(esc(e["note"]))
        elif e["samples"]:
            parts = []
            if e["samples"]["left"]:
                parts.append(_("samples left out since: {ids}").format(
                    ids=", ".join(f"[{i}](run-{{run}}-evidence.md#sample-{i})" for i in e["samples"]["left"])))
            if e["samples"]["joined"]:
                parts.append(_("samples counted since: {ids}").format(
                    ids=", ".join(f"[{i}](run-{{run}}-evidence.md#sample-{i})" for i in e["samples"]["joined"])))
            why = "; ".join(parts)
        else:
            why = _("recomputed from the database")
        lines.append("- " + _("**{label}**: published {published} as {was}; since {when}: {now} — {why}").format(
            label=label, published=L.datetime(e["published_at"]), was=was, when=when, now=now, why=why))
    return "\n".join(lines) + "\n"


def with_addenda(text: str, run_id: int, entries: list[dict], L: Lang) -> str:
    """The article ``text`` with its *Addenda* section made of ``entries`` (none: without one)."""
    text = str(text)  # plain text: an MD page would escape what is joined to it
    section = addenda_section(entries, L).replace("run-{run}-evidence", f"run-{run_id}-evidence")
    return _SECTION.sub("", text).rstrip("\n") + ("\n" + section if section else "\n")


def published_runs(db: sqlite_utils.Database) -> set[int]:
    """The runs some publication stated figures of: their articles carry an *Addenda* section."""
    if "published_figures" not in db.table_names():
        return set()
    return {r[0] for r in db.execute("select distinct run_id from published_figures").fetchall()}


def link_addenda(page: Path, run_id: int, entries: list[dict], L: Lang) -> bool:
    """Replace the article's *Addenda* section with ``entries`` (none: the section goes); True if changed."""
    text = page.read_text()
    new = with_addenda(text, run_id, entries, L)
    if new == text:
        return False
    page.write_text(new)
    return True


def write_addenda(db_path: Path, docs_dir: Path) -> list[Path]:
    """Give every run article its *Addenda* (both languages); returns the pages it changed."""
    conn = connect_readonly(db_path)
    pages = []
    try:
        db = sqlite_utils.Database(conn)
        if "published_figures" not in db.table_names():
            return []
        for (run_id,) in db.execute("select distinct run_id from published_figures order by run_id").fetchall():
            entries = addenda(db, run_id)
            for lang in LANGUAGES:
                page = docs_dir / "runs" / (f"run-{run_id}.md" if lang == "en" else f"run-{run_id}.{lang}.md")
                if page.exists() and link_addenda(page, run_id, entries, Lang(lang)):
                    pages.append(page)
    finally:
        conn.close()
    return pages
