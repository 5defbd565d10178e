"""Server logs imported without a campaign: a short article each.

``cardproof logs import server.log`` with no run stores the log's loads,
facts and the requests the server counted itself; ``cardproof report build``
then writes ``site/logs/source-<id>.md`` (and ``.de.md``) per such log:
its loads, their facts, observed requests and CUDA errors, each linked to
its lines, and the lines themselves -- the same evidence section a run
article has (``sections/evidence_logs.md.j2``, ``sections/observed.md.j2``),
for the loads of one log instead of one run.

In short, ``observed.py``: observed requests and pages for logs imported without a
campaign
"""

from __future__ import annotations

from pathlib import Path

from cardproof.daemon.campaign.evidence import load_summaries

from .evidence import SPEC_FACTS, _fact_rows, display_text, journal_excerpt
from .i18n import CATALOGUE, LANGUAGES, Lang
from .privacy import source_name

#: Lines printed per load on a log's page; every line a fact or request links to is printed too.
MAX_LINES_PER_LOAD = 2000


def log_sources(db) -> list[dict]:
    """The imported logs that have lines outside any run, oldest first."""
    conn = db.conn if hasattr(db, "conn") else db
    rows = conn.execute(
        "select s.id, s.kind, s.name, s.updated_at, count(l.id) from log_sources s join log_lines l "
        "on l.source_id = s.id and l.run_id is null group by s.id order by s.id").fetchall()
    return [dict(zip(("id", "kind", "name", "updated_at", "lines"), r)) for r in rows]


def source_evidence(db, source_id: int, *, max_lines_per_load: int = MAX_LINES_PER_LOAD) -> dict:
    """The evidence of one log's run-less lines, in the shape :func:`report.evidence.run_evidence` gives.

    Every load carries ``observed`` (the server's own request counters) and
    ``shown`` includes each line a fact, an excerpt or an observed request
    links to, whatever the cap.
    """
    conn = db.conn if hasattr(db, "conn") else db
    ids = [r[0] for r in conn.execute(
        "select id from loads where source_id = ? and run_id is null and merged_into is null order by id",
        [source_id])]
    loads = [ld for ld in load_summaries(db, load_ids=ids) if ld["lines"]] if ids else []
    for ld in loads:
        ld["fact_rows"] = _fact_rows(ld)
        ld["excerpt"] = journal_excerpt(db, ld["id"], SPEC_FACTS)
        linked = ({r["line_id"] for r in ld["fact_rows"]} | {x["id"] for x in ld["excerpt"]}
                  | set(ld["observed"]["line_ids"][:1]))
        rows = conn.execute("select id, raw from log_lines where load_id = ? order by id limit ?",
                            [ld["id"], max_lines_per_load]).fetchall()
        extra = sorted(linked - {lid for lid, _ in rows})
        if extra:
            marks = ", ".join("?" * len(extra))
            rows += conn.execute(f"select id, raw from log_lines where id in ({marks})", extra).fetchall()
        ld["shown"] = [{"id": lid, "text": display_text(raw)} for lid, raw in sorted(rows)]
        ld["not_shown"] = ld["lines"] - len(ld["shown"])
    where = "source_id = ? and run_id is null"
    n_un = conn.execute(f"select count(*) from log_lines where {where} and load_id is null", [source_id]).fetchone()[0]
    un = conn.execute(f"select id, raw from log_lines where {where} and load_id is null order by id limit 200",
                      [source_id]).fetchall()
    gaps = conn.execute("select g.at, g.reason, g.reason_json, g.lines_skipped, s.kind, s.name from capture_gaps g "
                        "join log_sources s on s.id = g.source_id where g.source_id = ? order by g.id",
                        [source_id]).fetchall()
    return {
        "loads": loads,
        "unattributed": {"count": n_un, "shown": [{"id": i, "text": display_text(r)} for i, r in un]},
        "gaps": [dict(zip(("at", "reason", "reason_json", "lines_skipped", "kind", "name"), g)) for g in gaps],
        "total_lines": conn.execute(f"select count(*) from log_lines where {where}", [source_id]).fetchone()[0],
    }


def log_view(db, source: dict) -> dict:
    """What ``logs.md.j2`` shows for one imported log."""
    evidence = source_evidence(db, source["id"])
    errors = [{"load": ld["id"], "model": ld["model"], "text": text, "line_id": lid}
              for ld in evidence["loads"]
              for text, lid in zip(ld["facts"].get("cuda_error", []), ld["fact_lines"].get("cuda_error", []))]
    # a log's name is a path on someone's machine: its last part says which log it is
    return {"source": source | {"title": source_name(source["name"])},
            "evidence": evidence, "cuda_errors": errors, "crashes": _crashes(db, source["id"], evidence)}


def _crashes(db, source_id: int, evidence: dict) -> list[dict]:
    """Every line of the log that says a process died by a signal, in a load or not.

    A docker, systemd or kernel line is its writer's own, in no server's load, and still the
    only word of how a server ended; each is linked where the page prints its line.
    """
    conn = db.conn if hasattr(db, "conn") else db
    rows = conn.execute(
        "select f.line_id, f.value_text, f.load_id, coalesce(m.name, d.model_name), l.raw from facts f "
        "join log_lines l on l.id = f.line_id left join loads d on d.id = f.load_id "
        "left join models m on m.id = d.model_id "
        "where f.name = 'crash_signal' and l.source_id = ? and l.run_id is null order by f.line_id",
        [source_id]).fetchall()
    shown = {x["id"] for ld in evidence["loads"] for x in ld["shown"]}
    shown |= {x["id"] for x in evidence["unattributed"]["shown"]}
    return [{"line_id": lid, "signal": sig, "load": load, "model": model, "text": display_text(raw)[:300],
             "linked": lid in shown} for lid, sig, load, model, raw in rows]


def _render(template: str, lang: str, show_addresses: bool, **context) -> str:
    """A page in the site's own Markdown environment (report/render.py), the way the articles are
    rendered: the same message wrapper and publishing context (addresses masked) from report/mdsafe.py."""
    from .mdsafe import publishing, translator
    from .render import environment

    L = Lang(lang)
    with publishing(show_addresses=show_addresses):
        return environment().get_template(template).render(
            _=translator(L.gettext, CATALOGUE), L=L, lang=lang, **context)


def render_log(view: dict, lang: str, *, show_addresses: bool = False) -> str:
    return _render("logs.md.j2", lang, show_addresses, run={"id": None}, **view)


def render_logs_index(sources: list[dict], lang: str, *, show_addresses: bool = False) -> str:
    return _render("logs_index.md.j2", lang, show_addresses, sources=sources)


def write_log_articles(db, project: Path, *, show_addresses: bool = False) -> list[Path]:
    """``site/logs/``: one article per imported log with lines outside any run, and their index.

    Pages of logs no longer in the database go away; without any such log
    the folder is removed, so a site of runs only looks as before.
    """
    out = Path(project) / "site" / "logs"
    sources = log_sources(db)
    written: list[Path] = []
    keep: set[str] = set()
    for src in sources:
        view = log_view(db, src)
        src["title"] = view["source"]["title"]
        src["loads"] = len(view["evidence"]["loads"])
        src["observed"] = sum(ld["observed"]["count"] for ld in view["evidence"]["loads"])
        for lang in LANGUAGES:
            name = f"source-{src['id']}{'' if lang == 'en' else '.' + lang}.md"
            out.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(render_log(view, lang, show_addresses=show_addresses))
            keep.add(name)
            written.append(out / name)
    if sources:
        for lang in LANGUAGES:
            name = f"index{'' if lang == 'en' else '.' + lang}.md"
            (out / name).write_text(render_logs_index(sources, lang, show_addresses=show_addresses))
            keep.add(name)
            written.append(out / name)
    if out.is_dir():
        for f in out.glob("*.md"):
            if f.name not in keep:
                f.unlink()
        if not any(out.iterdir()):
            out.rmdir()
    return written
