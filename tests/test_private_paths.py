"""A user's name in a home-folder path is masked wherever client addresses are; a log is published by its file name.

Real data: Poseidon's server log (tests/fixtures/logs/real/, from
github.com/racek256/Poseidon) names its model as
``/home/racek/Projects/Poseidon/models/gemma-3-1b-it-Q4_0.gguf``. It is
imported from a folder named like a home folder into a real store, then the
public database copy and the log's page are made from it.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path
from cardproof.daemon.store import open_store
from cardproof.report.exports import public_database
from cardproof.report.observed import write_log_articles
from cardproof.report.privacy import mask_home, public_text, source_name

POSEIDON = Path(__file__).parent / "fixtures" / "logs" / "real" / "poseidon-rocm-then-cpu.log"


@pytest.mark.parametrize("raw, shown", [
    ("loading model '/home/alice/models/x.gguf'", "loading model '/home/<user>/models/x.gguf'"),
    ("from /Users/bob/.cache/huggingface/m.gguf (version GGUF V3)", "from /Users/<user>/.cache/huggingface/m.gguf "
                                                                    "(version GGUF V3)"),
    (r"C:\Users\Carol Smith\models\m.gguf", r"C:\Users\<user>\models\m.gguf"),
    ("d:/users/dave/m.gguf", "d:/users/<user>/m.gguf"),
    (r'{"model":"C:\\Users\\eve\\m.gguf"}', r'{"model":"C:\\Users\\<user>\\m.gguf"}'),  # JSON text
    ("/var/home/frank/x.gguf and (/home/gina)", "/var/home/<user>/x.gguf and (/home/<user>)"),
    # JSON text encoded twice (a tool call's arguments inside a stored answer), a doubled separator, XP's folder
    (r'"{\\"model\\":\\"C:\\\\Users\\\\eve\\\\m.gguf\\"}"', r'"{\\"model\\":\\"C:\\\\Users\\\\<user>\\\\m.gguf\\"}"'),
    ("/home//alice/m.gguf", "/home//<user>/m.gguf"), ("C://Users//bob/m.gguf", "C://Users//<user>/m.gguf"),
    (r"C:\Documents and Settings\bob\m.gguf", r"C:\Documents and Settings\<user>\m.gguf"),
    # %-encoded, as a URL's query or a file link carries a path
    ("GET /open?path=%2Fhome%2Falice%2Fm.gguf&x=1", "GET /open?path=%2Fhome%2F<user>%2Fm.gguf&x=1"),
    ("file:%2F%2F%2FUsers%2Fbob%2Fm.gguf", "file:%2F%2F%2FUsers%2F<user>%2Fm.gguf"),
    ("C%3A%5CUsers%5Ccarol%5Cm.gguf", "C%3A%5CUsers%5C<user>%5Cm.gguf"),
    # no one's home: a URL's /users/, the root account, a masked path again
    ("GET /api/users/42", None), ("/root/models/x.gguf", None), ("/home/<user>/x", None), ("/models/x.gguf", None),
])
def test_the_user_in_a_home_folder_path_is_masked_and_the_path_stays_readable(raw, shown):
    assert mask_home(raw) == (raw if shown is None else shown)


def test_the_opt_out_shows_home_folders_as_it_shows_addresses():
    text = "/home/alice/m.gguf from 192.168.1.5"
    assert public_text(text) == "/home/<user>/m.gguf from 192.168.1.x"
    assert public_text(text, show_addresses=True) == text


@pytest.mark.parametrize("name, shown", [("/home/alice/logs/server.log", "server.log"),
                                         (r"C:\Users\bob\logs\server.log", "server.log"),
                                         ("llama-server.service", "llama-server.service")])
def test_a_log_source_is_named_by_its_file(name, shown):
    assert source_name(name) == shown


def _store_with_the_log(tmp_path) -> Path:
    folder = tmp_path / "home" / "alice" / "logs"
    folder.mkdir(parents=True)
    log = folder / "server.log"
    shutil.copyfile(POSEIDON, log)
    db = tmp_path / "s.db"
    store = open_store(db)
    try:
        import_path(store, log)
        sid = store.db.execute("select id from log_sources").fetchone()[0]
        with store.db.conn:  # a gap in the capture names its source on the page
            store.db.conn.execute("insert into capture_gaps (source_id, at, reason, lines_skipped) values (?, ?, ?, ?)",
                                  [sid, "2026-01-01T00:00:00+00:00", "file truncated", 3])
    finally:
        store.close()
    return db


@pytest.mark.parametrize("show", [False, True], ids=["masked", "opted out"])
def test_the_public_database_names_no_user_and_no_folder_of_the_author(tmp_path, show):
    db = _store_with_the_log(tmp_path)
    out = tmp_path / "public.db"
    public_database(db, out, show_addresses=show)
    raw = out.read_bytes()
    conn = sqlite3.connect(out)
    try:
        (name, state), = conn.execute("select name, state_json from log_sources").fetchall()
        files = [r[0] for r in conn.execute("select model_file from loads order by id")]
    finally:
        conn.close()
    assert name == "server.log" and "file_head" not in state  # the log's first bytes, as hex, are no one's business
    assert str(tmp_path).encode() not in raw
    if show:
        assert files[0] == "/home/racek/Projects/Poseidon/models/gemma-3-1b-it-Q4_0.gguf"
    else:
        assert b"racek" not in raw and b"alice" not in raw
        assert files[0] == "/home/<user>/Projects/Poseidon/models/gemma-3-1b-it-Q4_0.gguf"


def test_the_log_page_names_no_user_and_no_folder_of_the_author(tmp_path):
    db = _store_with_the_log(tmp_path)
    store = open_store(db, mode="ro")
    try:
        pages = write_log_articles(store.db, tmp_path / "p")
    finally:
        store.close()
    text = "".join(p.read_text() for p in pages if p.suffix == ".md")
    assert "server.log" in text and "/home/&lt;user&gt;/Projects/Poseidon/models" in text.replace("\\<", "&lt;")
    assert "racek" not in text and "alice" not in text and str(tmp_path) not in text


def test_a_trend_pages_file_name_names_no_user_and_no_address(tmp_path):
    """Issue: the trend page of a model named by its file, ``/home/alice/models/m.gguf``, was
    ``trend-nightly-home-alice-models-m-gguf`` (its CSV likewise): the page masked the name, its address did not."""
    from cardproof.report.history.render import write_trends
    from history_data import make_db

    make_db(tmp_path / "h.db", [{"level": 100.0}, {"level": 101.0}], name="lab 192.168.77.13",
            model="/home/alice/models/m.gguf")
    store = open_store(tmp_path / "h.db", mode="ro")
    try:
        write_trends(store.db, tmp_path / "p")
    finally:
        store.close()
    names = [f.name for f in (tmp_path / "p" / "site").rglob("*")]
    assert [n for n in names if n.startswith("trend-")], names
    assert [n for n in names if "alice" in n or "192-168-77-13" in n] == []
    assert "trend-lab-192-168-77-x-home-user-models-m-gguf.md" in names
