"""``cardproof logs import`` and ``cardproof loads``: server logs as evidence."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cardproof.daemon.logs.display import LIMIT_TEXT, LOAD_KEYS, load_line, refused_lines, unplaced_line
from cardproof.daemon.logs.lines import MAX_LINE_BYTES

from .common import db_option, fail, open_db, progress

_WARNINGS = {
    "non_utf8": "lines not valid UTF-8 (stored, with their bytes)",
    "too_long": f"lines longer than {LIMIT_TEXT} ({MAX_LINE_BYTES:,} bytes) refused: not stored (named below)",
    "bad_json": "lines that are not journal JSON (skipped)",
    "no_message": "journal entries without a MESSAGE (skipped)",
    "journal_blob_data": "lines are journalctl's '[N blob data]' placeholders, not the server's text "
                         "(stored as they are; export the journal with `journalctl -a` or `-o export` to read them)",
}


def _check_run(store, run_id: int | None) -> None:
    if run_id is not None and store.db.execute("select 1 from runs where id = ?", [run_id]).fetchone() is None:
        store.close()
        fail(f"no run {run_id} in {store.path}", 2)


@click.group()
def logs() -> None:
    """Server logs: import them as evidence, attributed to model loads."""


@logs.command("import")
@click.argument("path", type=click.Path(path_type=Path))
@db_option
@click.option("--format", "fmt", type=click.Choice(["auto", "journal-json", "journal-file", "plain"]),
              default="auto", show_default=True,
              help="plain: a llama-server/Ollama log file; journal-json: `journalctl -o json` output; "
                   "journal-file: a binary journal file.")
@click.option("--run", "run_id", type=int, default=None,
              help="Tag the lines with this run and link its loads to the ones found in the log.")
def logs_import(path: Path, db: Path | None, fmt: str, run_id: int | None) -> None:
    """Import PATH; lines already imported from it are not imported again.

    Every line is stored unchanged, attributed to the model load it
    belongs to (router port, PID, explicit start/exit lines) or marked
    unattributed, and parsed into load facts.
    """
    from cardproof.daemon.logs import LogSourceError, attribute_run, import_path
    from cardproof.daemon.store import StoreError

    store = open_db(db, create=True)
    _check_run(store, run_id)
    try:
        stats = import_path(store, path, fmt=fmt, run_id=run_id, progress=progress)
        linked = attribute_run(store, run_id) if run_id is not None else None
    except (LogSourceError, StoreError) as exc:
        fail(str(exc))
    finally:
        store.close()
    for key, count in sorted(stats["warnings"].items()):
        click.echo(f"warning: {count} {_WARNINGS.get(key, key)}", err=True)
    if stats["gaps"]:
        click.echo(f"warning: {stats['gaps']} gap(s) in capture recorded (see table capture_gaps)", err=True)
    observed = stats.get("observed_requests") or 0
    refused = len(stats.get("refused") or ())
    click.echo(
        f"{path}: {stats['lines']:,} new lines ({stats['kind']}), {stats['attributed']:,} attributed, "
        f"{stats['unattributed']:,} unattributed"
        + (f", {refused:,} refused (longer than {LIMIT_TEXT}, not stored)" if refused else "")
        + f"; {stats['loads']} loads found, {stats['facts']:,} facts"
        + (f", {observed:,} requests in the server's own counters" if observed else "")
        + (f"; {len(linked['matched'])} linked to run {run_id}'s loads" if linked else "")
    )
    for line in refused_lines(stats):
        click.echo(f"{path}: {line}")
    why = unplaced_line(stats)
    if why:
        click.echo(f"{path}: {why}")


@click.command("loads")
@db_option
@click.option("--run", "run_id", type=int, default=None, help="Only the loads of this run.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list: model, started_at, pid, port, facts, lines.")
def loads_cmd(db: Path | None, run_id: int | None, as_json: bool) -> None:
    """List model loads with the facts their log lines state."""
    from cardproof.daemon.logs import load_summaries

    store = open_db(db, readonly=True)
    _check_run(store, run_id)
    try:
        loads = load_summaries(store.db, run_id=run_id)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps([{k: ld.get(k) for k in LOAD_KEYS} for ld in loads], indent=2, ensure_ascii=False))
        return
    if not loads:
        click.echo("no loads" + (f" in run {run_id}" if run_id is not None else ""))
        return
    for ld in loads:
        click.echo(load_line(ld))


@logs.command("show")
@click.argument("load_id", type=int, required=False)
@db_option
@click.option("--unplaced", is_flag=True, help="The lines no load could claim, instead of a load's lines.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many lines.")
@click.option("--json", "as_json", is_flag=True, help="JSON: the load, its lines and its observed requests.")
def logs_show(load_id: int | None, db: Path | None, unplaced: bool, limit: int | None, as_json: bool) -> None:
    """List the stored lines of load LOAD_ID (see `cardproof loads`), verbatim, with their ids."""
    from cardproof.daemon.logs.display import show

    if (load_id is None) == (not unplaced):
        fail("give a load id (see `cardproof loads`) or --unplaced", 2)
    store = open_db(db, create=False)
    try:
        code = show(store, load_id, unplaced=unplaced, limit=limit, as_json=as_json, echo=click.echo)
    finally:
        store.close()
    if code:
        fail(code, 2)


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (logs, loads_cmd,)
