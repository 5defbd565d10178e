"""Corrections stay visible: what a publication put out, and an *Addenda* section where it changed since.

``cardproof publish`` records, for every finished run, every statement its article makes
(report/statements.py, one registered function per kind): the headline per prompt class (the
sentence the article stated), each cell's decode and prefill median (rounded as the table shows them,
with the sample ids behind them), each model's load time, each rule's outcome, each probe's verdict,
each expectation confirmed or refuted, the fastest variant of each class (or that none is measurably
faster), each knee of a load sweep and the most streams or the highest rate at the service level,
each contradiction open or resolved, each gate that fired or never fired, each caveat and each
finding, as each language showed them. Every build compares the run's publications in order, and
the last one with what the database says now; a statement that changed, was withdrawn or is newly
made gets an entry in the article's *Addenda*: what was published, what replaced it, when, and why
-- the author's note given to the publication that changed it, or, for a median, the samples that
left or joined it.

Labels and statements are stored as shown in each language, so an addendum quotes exactly what
readers saw. A publication names the kinds it recorded (m025), so a statement newly made is told
from one a publication made before did not record: rows recorded before still read, and compare as
they did.

In short, ``addenda.py``, ``statements.py``: ``cardproof publish`` records every
statement each article makes (``publications``, ``published_figures``); a later build that states
one otherwise, no longer, or anew gives the article an *Addenda* section quoting the published words
and what replaced them, in each language, with when and why (the next publication's note, or the
samples that left or joined a median). ``statements.py`` holds the one table of statement kinds
(``KINDS``), each a function of the article view (``ArticleView.context()``) to ``{key:
Statement(label, text per language, compared value)}``: cell medians, load times, the headline (the
sentence the Headline section stated: a ratio, "no measurable difference", left out as unstable, or
"No headline: the run did not finish" for an interrupted or failed run, which is published too;
compared: the ratio where one was stated, else the kind of sentence), rule outcomes as the Decision
section shows them, probe verdicts, expectations, the fastest variant per class and metric ("none
measurably faster" included), each load sweep's knee and its most streams or highest rate at the
service level, contradictions open or resolved (the author's too), gates that fired or never fired
(unproven), caveats and findings. ``publish`` builds each run's article view for it (with the
project's notes); a build compares with the view it renders. A publication names the kinds it
recorded (m025): a statement of a recorded kind that it lacks is newly made ("not stated when
published"); one made before names none and reads as figures only, never as missing the rest. A
record without ``form`` (made before) equals a statement whose ``legacy`` value it holds (a
headline's ratio, a rule's stored outcome where the page says "unverified")
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import sqlite_utils

from . import queries
from .i18n import LANGUAGES, Lang
from .statements import FORM, KINDS, LEGACY_KINDS, statements
from cardproof.daemon.store import json_text, json_value
from cardproof.daemon.store.publications import KINDS_COLUMN, insert_publication
from cardproof.daemon.store.file import connect_readonly

_ADDENDA_MARK = '<span id="addenda"></span>'
_SECTION = re.compile(r"\n\n## [^\n]*\{#addenda\}\n\n" + re.escape(_ADDENDA_MARK) + r".*\Z", re.S)


def records(view: dict) -> dict[str, dict]:
    """Every statement of the article whose view is ``view``, as a publication records it, by key.

    ``value`` (compared), ``label`` and ``shown`` per language, ``form``; ``samples`` behind a median;
    ``legacy`` where a record made before ``statements.FORM`` held another value for the same data.
    """
    out = {}
    for key, s in statements(view).items():
        f = {"value": s.value, "label": s.label, "shown": s.text, "form": FORM}
        if s.samples is not None:
            f["samples"] = s.samples
        if s.legacy is not None:
            f["legacy"] = s.legacy
        out[key] = f
    return out


def figures(db: sqlite_utils.Database, run_id: int, project: Path | None = None) -> dict[str, dict]:
    """What the run's article states (:func:`records`), its article view built here as the build builds it.

    ``project``: where the author's notes are (their contradictions are stated too); the comparison
    with the run before and the campaign's ratio range state nothing recorded, so they are left out.
    """
    from .views import article_view

    view = article_view(db, queries.run_view(db, run_id), previous_id=None, ratio=None, views={},
                        project=project)
    return records(view.context())


def record_publication(db: sqlite_utils.Database, *, note: str | None = None, version: str = "",
                       project: Path | None = None) -> int:
    """A publication of every finished run's statements, now; returns its id.

    Finished: completed, and also interrupted or failed (by the effective status readers see): their
    articles are published too, and say "No headline: the run did not finish", which is what a later
    addendum must quote. A run still running (or not heard from) states nothing final yet. The
    publication names the statement kinds it recorded: a statement of one of them that a later build
    makes and this publication did not record was not stated then, and gets an addendum too.
    ``project``: where the author's notes are, as the build that follows reads them.
    """
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    runs = sorted(r["id"] for r in queries.runs(db) if r["status"] not in ("running", "stale"))
    rows = []
    for run_id in runs:
        for key, f in figures(db, run_id, project).items():
            rows.append({"run_id": run_id, "key": key, "value": f["value"],
                         "shown_json": json_text({k: f[k] for k in _STORED if k in f}, ensure_ascii=False)})
    return insert_publication(db, published_at=at, note=(note or "").strip() or None, version=version,
                              kinds=sorted(KINDS), figures=rows)


#: what a record keeps beside its value (``shown_json``)
_STORED = ("label", "shown", "samples", "form", "legacy")


def _published(db: sqlite_utils.Database, run_id: int) -> list[dict]:
    """The run's publications in order: ``at``, ``note``, ``kinds`` (None: made before they were named),
    ``figures`` (key -> stored record)."""
    if "published_figures" not in db.table_names():
        return []
    # a store read as it is, published by an older cardproof, may lack the column
    kinds = f"publications.{KINDS_COLUMN}" if KINDS_COLUMN in db["publications"].columns_dict else "null"
    pubs: dict[int, dict] = {}
    for r in db.query(f"""select publications.id, publications.published_at, publications.note, {kinds} as kinds,
                                 key, value, shown_json
                          from published_figures join publications on publications.id = publication_id
                          where run_id = ? order by publications.id, published_figures.id""", [run_id]):
        pub = pubs.setdefault(r["id"], {"at": r["published_at"], "note": r["note"], "kinds": _kinds(r["kinds"]),
                                        "figures": {}})
        pub["figures"][r["key"]] = {"value": r["value"], **json_value(r["shown_json"], dict, {})}
    return list(pubs.values())


def _kinds(text: str | None) -> frozenset[str] | None:
    kinds = json_value(text, list)
    return frozenset(k for k in kinds if isinstance(k, str)) if kinds is not None else None


def addenda(db: sqlite_utils.Database, run_id: int, view: dict | None = None,
            project: Path | None = None) -> list[dict]:
    """Every published statement of the run that a later publication, or the database now, states
    otherwise, no longer states, or states where it was not stated.

    ``view``: the run's article view (``ArticleView.context()``) where the caller built it; else it is
    built here (with the author's notes in ``project``).
    """
    states = _published(db, run_id)
    if not states:
        return []
    now = records(view) if view is not None else figures(db, run_id, project)
    current = {"at": None, "note": None, "kinds": frozenset(KINDS), "figures": now}
    if _changes(states[-1], current):
        states.append(current)  # not yet published: this build
    out = []
    for before, after in zip(states, states[1:]):
        for key, was, new in _changes(before, after):
            out.append({"key": key, "was": was, "now": new, "published_at": before["at"],
                        "changed_at": after["at"], "note": after["note"], "samples": _sample_change(was, new)})
    return out


def _changes(before: dict, after: dict) -> list[tuple[str, dict | None, dict | None]]:
    """(key, was, now) of each statement ``after`` states otherwise than ``before``.

    Compared are the kinds ``after`` records: a statement ``after`` lacks is withdrawn. A statement
    ``before`` lacks is new where ``before`` recorded its kind; a publication made before kinds were
    named (``kinds`` None) recorded figures only, and says nothing of what it did not record.
    """
    def kind(key: str) -> str:
        return key.split(":", 1)[0]

    recorded = after["kinds"] or LEGACY_KINDS
    out = [(key, was, after["figures"].get(key)) for key, was in before["figures"].items()
           if kind(key) in recorded and not _same(was, after["figures"].get(key))]
    if before["kinds"] is not None:
        out += [(key, None, new) for key, new in after["figures"].items()
                if key not in before["figures"] and kind(key) in before["kinds"]]
    return out


def _same(was: dict, new: dict | None) -> bool:
    """Whether ``new`` states what ``was`` stated.

    A record made before its kind's current form (no ``form``) may hold another value for the same
    statement (a headline's "best/other ratio" whatever the article said, a rule's stored outcome where
    the article said "unverified"): it is the same where the data still give that value (``legacy``),
    so a store published by an older cardproof gets no addendum from the change of record alone.
    """
    if new is None:
        return False
    if new["value"] == was.get("value"):
        return True
    return "form" not in was and new.get("legacy") is not None and new["legacy"] == was.get("value")


def _sample_change(was: dict | None, new: dict | None) -> dict | None:
    """For a median: the sample ids that left it and those that joined it."""
    if was is None or new is None or "samples" not in was or "samples" not in new:
        return None
    old_ids, new_ids = set(was["samples"]), set(new["samples"])
    if old_ids == new_ids:
        return None
    return {"left": sorted(old_ids - new_ids), "joined": sorted(new_ids - old_ids)}


def addenda_section(entries: list[dict], L: Lang) -> str:
    """The *Addenda* section of an article in ``L``'s language; empty when nothing published changed.

    Labels, statements and the author's note are escaped like any text from the store (a merged
    database may hold anything); the sample links are ours.
    """
    if not entries:
        return ""
    _ = L.gettext
    lines = [f"\n\n## {_('Addenda')} {{#addenda}}\n\n{_ADDENDA_MARK}"
             + _("Statements published earlier that the data now state otherwise, no longer state or state "
                  "anew; the published wording stays here.") + "\n"]
    for e in entries:
        label = _said(e["was"] or e["now"], "label", L, fallback=e["key"])
        now = _("withdrawn: no longer stated") if e["now"] is None else _said(e["now"], "shown", L)
        when = L.datetime(e["changed_at"]) if e["changed_at"] else _("this build, not yet published")
        params = {"label": label, "published": L.datetime(e["published_at"]), "when": when, "now": now,
                  "why": _why(e, L)}
        if e["was"] is None:
            lines.append("- " + _("**{label}**: not stated when published {published}; since {when}: {now} — "
                                  "{why}").format(**params))
        else:
            lines.append("- " + _("**{label}**: published {published} as {was}; since {when}: {now} — {why}").format(
                was=_said(e["was"], "shown", L), **params))
    return "\n".join(lines) + "\n"


def _said(record: dict, part: str, L: Lang, fallback: str | None = None) -> str:
    """A record's ``label`` or ``shown`` in ``L``'s language, escaped; ``fallback`` (else its value) where
    it has none."""
    from .mdsafe import esc

    text = record[part].get(L.code) if isinstance(record.get(part), dict) else None
    return str(esc(text or (record["value"] if fallback is None else fallback)))


def _why(e: dict, L: Lang) -> str:
    """Why a statement changed: the author's note, the samples that left or joined a median, or neither."""
    from .mdsafe import esc

    _ = L.gettext
    if e["note"]:
        return str(esc(e["note"]))
    if not e["samples"]:
        return _("recomputed from the database")
    parts = []
    if e["samples"]["left"]:
        parts.append(_("samples left out since: {ids}").format(
            ids=", ".join(f"[{i}](run-{{run}}-evidence.md#sample-{i})" for i in e["samples"]["left"])))
    if e["samples"]["joined"]:
        parts.append(_("samples counted since: {ids}").format(
            ids=", ".join(f"[{i}](run-{{run}}-evidence.md#sample-{i})" for i in e["samples"]["joined"])))
    return "; ".join(parts)


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
