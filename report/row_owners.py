"""Which run each stored row belongs to, read from the schema: what an incremental build follows.

A run's pages are made again when a row they read changes (report/fingerprints.py). Which rows those
are is not a list kept by hand (a list left out ``variants``, ``load_steps`` and ``observed_requests``,
and their changes left pages stale): every table of the store is placed in one of four kinds, from
its columns and foreign keys, so a table a later migration adds is followed without anyone naming it.

- *owned*: a ``run_id`` column, or a reference (a declared foreign key, or a column ``<name>_id``
  naming the table ``<name>s``) to an owned table, followed as far as it goes: ``gate_results`` by
  its sample, ``facts`` by their load. A change renders that run again.
- *by use*: rows shared by runs that a run's pages print where the run names them (its models, its
  campaign, its registration); ``fingerprints._shared_rows`` reads them per run.
- *everywhere*: any other table a run page may read (``publications``, ``capture_gaps``, the name of
  a log source): a change renders every run again; ``EVERYWHERE_COLUMNS`` narrows a table to the
  columns the pages print, where its other columns change with every import (a source's cursor).
- *no run page*: ``NOT_ON_RUN_PAGES``, each with the reason. The pages that do read them decide
  their own freshness (the runs index is written on every build; the trend pages key their own).
"""

from __future__ import annotations

from dataclasses import dataclass

#: tables no run article or evidence page reads, and why
NOT_ON_RUN_PAGES = {
    "_sqlite_migrations": "the migrations' own record",
    "row_changes": "the store's record of its writes: read as such, never printed",
    "daemon_state": "the daemon's heartbeat and progress (cardproof daemon status), written every few seconds",
    "daemon_queue": "campaigns waiting for the daemon",
    "daemon_queue_runs": "which queued campaign started which run",
    "merges": "the record of cardproof merge",
    "llama_bench_imports": "llama-bench results: the runs index and the trend pages, made on every build",
    "llama_bench_results": "llama-bench results: the runs index and the trend pages, made on every build",
}

#: rows shared by runs, read per run where its rows name them (``fingerprints._shared_rows``)
BY_USE = ("models", "campaigns", "registrations")

#: the columns a run's pages print of a table that changes for other reasons
EVERYWHERE_COLUMNS = {"log_sources": ("id", "kind", "name")}


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Owned:
    """How the rows of ``table`` reach their run: ``joins`` (SQL after ``from <table>``) and ``run``,
    the expression that names the run."""

    table: str
    joins: str
    run: str

    def per_run(self, figures: str, where: str = "") -> str:
        """One row per run: the run's id, then ``figures`` over the table's rows (``{t}`` is the table)."""
        t = quote(self.table)
        return (f"select {self.run}, {figures.format(t=t)} from {t}{self.joins} "
                f"{where.format(t=t)} group by {self.run}")


def _references(conn, table: str, names: set[str]) -> list[tuple[str, str, str]]:
    """(column, parent table, parent column) for each reference of ``table``, in column order: declared
    foreign keys first where a column has one, else ``<name>_id`` naming the table ``<name>s``."""
    declared = {r[3]: (r[2], r[4] or "rowid") for r in conn.execute(f"pragma foreign_key_list({quote(table)})")}
    out = []
    for col in (r[1] for r in conn.execute(f"pragma table_info({quote(table)})")):
        if col in declared:
            out.append((col, *declared[col]))
        elif col.endswith("_id") and col[:-3] + "s" in names:
            out.append((col, col[:-3] + "s", "rowid"))
    return out


def owners(conn) -> dict[str, Owned]:
    """Every owned table of the store and how its rows reach their run (see the module's text)."""
    names = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table' "
                                        "and name not like 'sqlite_%'")}
    out: dict[str, Owned] = {}
    resolving: set[str] = set()

    def resolve(table: str) -> Owned | None:
        if table in out or table == "runs":
            return out.get(table)
        if table in NOT_ON_RUN_PAGES or table in BY_USE or table in resolving:
            return None
        cols = [r[1] for r in conn.execute(f"pragma table_info({quote(table)})")]
        t = quote(table)
        if "run_id" in cols:
            out[table] = Owned(table, "", f"{t}.run_id")
            return out[table]
        resolving.add(table)
        try:
            for col, parent, parent_col in _references(conn, table, names):
                up = resolve(parent) if parent in names else None
                if up is None:
                    continue
                alias = f"o_{len(out)}_{parent}".replace('"', "")
                # the parent's own joins, renamed under its alias, then the parent itself
                joins = (f" join {quote(parent)} {quote(alias)} on {quote(alias)}.{quote(parent_col)} = {t}.{quote(col)}"
                         + up.joins.replace(f"{quote(parent)}.", f"{quote(alias)}."))
                out[table] = Owned(table, joins, up.run.replace(f"{quote(parent)}.", f"{quote(alias)}."))
                return out[table]
        finally:
            resolving.discard(table)
        return None

    for name in sorted(names):
        resolve(name)
    return out


def everywhere(conn) -> list[str]:
    """The tables a change to which renders every run again: neither owned, by use nor on no run page."""
    names = sorted(r[0] for r in conn.execute("select name from sqlite_master where type = 'table' "
                                              "and name not like 'sqlite_%'"))
    owned = owners(conn)
    return [t for t in names if t not in owned and t not in BY_USE and t not in NOT_ON_RUN_PAGES and t != "runs"]
