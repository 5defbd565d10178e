"""``cardproof logs import`` and ``cardproof loads``: output, errors, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.logs import capture_file
from cardproof.daemon.store import open_store, utcnow

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "router-interleaved.log"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_commands_are_documented():
    for args in (["logs", "--help"], ["logs", "import", "--help"], ["loads", "--help"]):
        res = run(*args)
        assert res.exit_code == 0 and len(res.output.split("\n\n")[1].strip()) > 20, args


def test_import_then_loads_json(tmp_path):
    db = tmp_path / "c.db"
    res = run("logs", "import", FIXTURE, "--db", db)
    assert res.exit_code == 0, res.output
    assert "883 new lines (plain)" in res.output and "2 loads found" in res.output
    again = run("logs", "import", FIXTURE, "--db", db)
    assert "0 new lines" in again.output
    out = run("loads", "--db", db, "--json")
    assert out.exit_code == 0
    loads = json.loads(out.output)
    assert [ld["model"] for ld in loads] == ["tiny-b", "tiny-a"]
    for ld in loads:
        assert {"model", "started_at", "pid", "port", "facts", "lines"} <= set(ld)
        assert ld["lines"] > 100 and ld["port"] in (45707, 54611)
    a = loads[1]["facts"]
    assert a["compute_buffer_mib"] == {"CPU": pytest.approx(a["compute_buffer_mib"]["CPU"])}
    assert isinstance(a["compute_buffer_mib"], dict) and a["spec_type"] == "draft-simple"
    text = run("loads", "--db", db)
    assert "tiny-a" in text.output and "spec draft-simple" in text.output


def test_import_with_run_links_loads(tmp_path):
    db = tmp_path / "r.db"
    store = open_store(db)
    cid = store.insert("campaigns", {"name": "t", "sha256": "x", "registered_at": utcnow()})
    run_id = store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": "completed"})
    mid = store.upsert_model({"name": "tiny-a", "digest": None})
    load = store.insert("loads", {"run_id": run_id, "model_id": mid, "trigger": "explicit", "status": "loaded"})
    store.close()
    res = run("logs", "import", FIXTURE, "--db", db, "--run", run_id)
    assert res.exit_code == 0 and "1 linked to run" in res.output
    loads = json.loads(run("loads", "--db", db, "--run", run_id, "--json").output)
    linked = next(ld for ld in loads if ld["id"] == load)
    assert linked["port"] == 54611 and linked["facts"]["spec_type"] == "draft-simple"


@pytest.mark.parametrize("args,code,text", [
    (["logs", "import", "/no/such/file.log"], 1, "no such file"),
    (["logs", "import", "."], 1, "is a directory"),
    (["logs", "import", str(FIXTURE), "--run", "99"], 2, "no run 99"),
    (["logs", "import", str(FIXTURE), "--format", "journal-file"], 1, "not a systemd journal file"),
    (["loads", "--run", "5"], 2, "no run 5"),
])
def test_bad_input_one_line_error(tmp_path, args, code, text):
    db = tmp_path / "e.db"
    open_store(db).close()
    res = run(*args, "--db", db)
    assert res.exit_code == code, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and text in errors[0]


def test_missing_or_foreign_database(tmp_path):
    res = run("loads", "--db", tmp_path / "none.db")
    assert res.exit_code == 1 and "no such database" in res.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    res = run("logs", "import", FIXTURE, "--db", junk)
    assert res.exit_code == 1 and res.output.startswith("error:")


def test_binary_junk_is_stored_and_counted(tmp_path):
    junk = tmp_path / "junk.bin"
    data = os.urandom(300_000) + b"\x00" * 1000 + b"x" * (2 << 20)  # the tail: one line of 2 MiB
    junk.write_bytes(data)
    db = tmp_path / "j.db"
    res = run("logs", "import", junk, "--db", db)
    assert res.exit_code == 0, res.output
    assert "lines not valid UTF-8 (stored, with their bytes)" in res.output
    assert "refused" not in res.output  # 2 MiB is under the limit: stored whole
    store = open_store(db)
    n, non_utf8 = store.db.execute("select count(*), count(raw_bytes) from log_lines").fetchone()
    raw, raw_bytes = store.db.execute("select raw, raw_bytes from log_lines order by id desc limit 1").fetchone()
    store.close()
    assert n == data.count(b"\n") + 1 and non_utf8 > 0
    assert (raw.encode() if raw_bytes is None else raw_bytes) == data[data.rfind(b"\n") + 1:]


def test_garbled_journal_json_lines_are_skipped_and_counted(tmp_path):
    export = tmp_path / "export.json"
    good = {"__CURSOR": "s=1;i=1", "__REALTIME_TIMESTAMP": "1700000000000000", "_PID": "9", "MESSAGE": "ok"}
    export.write_text("\n".join([json.dumps(good), '{"MESSAGE": "trunc', "\x00\x01garbage",
                                 json.dumps({**good, "__CURSOR": "s=1;i=2", "MESSAGE": [104, 105, 255]}), ""]))
    db = tmp_path / "g.db"
    res = run("logs", "import", export, "--db", db)
    assert res.exit_code == 0, res.output
    assert "2 lines that are not journal JSON (skipped)" in res.output
    store = open_store(db)
    assert store.db.execute("select raw, raw_bytes, cursor from log_lines order by id").fetchall() == [
        ("ok", None, "s=1;i=1"), ("hi\ufffd", b"hi\xff", "s=1;i=2")]
    store.close()


def test_truncated_and_rotated_files(tmp_path):
    store = open_store(tmp_path / "f.db")
    log = tmp_path / "server.log"
    log.write_text("a\nb\n")
    assert capture_file(store, log)["lines"] == 2
    log.write_text("c\n")  # truncated by the writer (copytruncate)
    assert capture_file(store, log)["lines"] == 1
    gaps = store.db.execute("select reason from capture_gaps").fetchall()
    assert len(gaps) == 1 and "truncated" in gaps[0][0]
    # rotation with the old file kept as .1: its unread rest is read, no gap
    with log.open("a") as f:
        f.write("d\n")
    os.rename(log, tmp_path / "server.log.1")
    log.write_text("e\n")
    assert capture_file(store, log)["lines"] == 2
    assert [r[0] for r in store.db.execute("select raw from log_lines order by id")] == ["a", "b", "c", "d", "e"]
    # rotation without the old file: a gap
    log.unlink()
    log.write_text("f\n")
    capture_file(store, log)
    assert store.db.execute("select count(*) from capture_gaps").fetchone()[0] == 2
    store.close()


def test_long_import_shows_progress(tmp_path):
    log = tmp_path / "long.log"
    log.write_text("0.00.000.001 I srv  update_slots: all slots are idle\n" * 120_000)
    res = run("logs", "import", log, "--db", tmp_path / "p.db")
    assert res.exit_code == 0
    progress = [ln for ln in res.output.splitlines() if "lines imported" in ln]
    assert progress and "lines/s" in progress[0]
