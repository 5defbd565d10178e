"""``cardproof import``: results measured elsewhere, stored beside our own (llama-bench)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import db_option, fail, open_db


@click.group("import")
def import_group() -> None:
    """Import results produced by other tools."""


@import_group.command("llama-bench")
@click.argument("file", type=click.Path(path_type=Path))
@db_option
def import_llama_bench(file: Path, db: Path | None) -> None:
    """Import FILE, llama-bench output written with -o json or -o jsonl.

    Every pp/tg result keeps its whole configuration and raw samples_ts.
    These are in-process measurements: the report shows them in a table
    of their own, not mixed with server counters. Importing the same
    file again changes nothing.
    """
    from cardproof.daemon.logs.llamabench import LlamaBenchError, read_file, store_file
    from cardproof.daemon.store import StoreError

    try:
        bench = read_file(file)  # checked whole before the database is opened, let alone written
    except LlamaBenchError as exc:
        fail(str(exc))
    store = open_db(db)
    try:
        result = store_file(store, bench)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    if result["already"]:
        click.echo(f"{file}: already imported (import {result['import_id']}, {result['rows']} results)")
    else:
        click.echo(f"{file}: {result['rows']} llama-bench results imported ({result['format']}), "
                   f"import {result['import_id']}, db {store.path}")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (import_group,)
