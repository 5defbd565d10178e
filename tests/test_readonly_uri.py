"""Read-only opens of a store go through ``storefile.connect_readonly``, whose URI is percent-encoded."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from cardproof.daemon.store.file import connect_readonly

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("dirname", ["odd #1", "what?mode=rw", "pct%41x", "sp ace"])
def test_connect_readonly_opens_that_file(tmp_path, dirname):
    """A folder name with ``#``, ``?`` or ``%`` must not cut or decode the path: the file opened is
    the one named (its table is there), read-only, and no other file is created."""
    folder = tmp_path / dirname
    folder.mkdir()
    with sqlite3.connect(folder / "s.db") as w:
        w.execute("create table marker (a)")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    conn = connect_readonly(folder / "s.db")
    try:
        assert conn.execute("select name from sqlite_master").fetchall() == [("marker",)]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("insert into marker values (1)")
    finally:
        conn.close()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_no_hand_built_file_uri_in_the_sources():
    """Every read-only open uses connect_readonly: a ``f"file:{path}..."`` URI is the bug above."""
    bad = re.compile(r"""connect\(\s*f["']file:""")
    hits = [f"{p.relative_to(ROOT)}:{n}" for d in ("daemon", "report", "cardproof")
            for p in (ROOT / d).rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1) if bad.search(line)]
    assert hits == []
