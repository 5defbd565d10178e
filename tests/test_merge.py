"""``cardproof merge``: two real small databases, written by real runs, merged without duplicates."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs.llamabench import import_file
from cardproof.daemon.store.merge import MergeError, merge_database
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text, unload_all
from recorded_servers import RecordedOllama

LB_ROW = ('{"build_commit": "unknown", "model_filename": "/m/tiny-a.gguf", "n_prompt": 16, "n_gen": 0, '
          '"avg_ts": 57.9, "stddev_ts": 9.4, "samples_ts": [64.5, 51.3], "samples_ns": [247952484, 311974783]}\n')


@pytest.fixture(scope="module")
def two_dbs(llama_server, tmp_path_factory):
    """A: a real llama-server run with its log captured. B: a run against recorded Ollama, plus llama-bench."""
    d = tmp_path_factory.mktemp("merge")
    unload_all(llama_server.url)  # the run must load its model, so the log holds a load with facts
    a = open_store(d / "a.db")
    text = campaign_text(llama_server.url, reps=1)
    text = text.replace('request_timeout_s = 60', f'request_timeout_s = 60\nlog_file = "{llama_server.log_path}"')
    ra = run_campaign(a, parse_campaign(text), echo=lambda s: None)
    assert ra.status == "completed"
    a.close()
    b = open_store(d / "b.db")
    with RecordedOllama() as srv:
        rb = run_campaign(b, parse_campaign(_ollama(srv.url)), echo=lambda s: None)
    assert rb.status == "completed"
    (d / "lb.jsonl").write_text(LB_ROW)
    import_file(b, d / "lb.jsonl")
    b.db.execute("update runs set host = 'other-host' where id = ?", [rb.run_id])  # a second machine
    b.db.conn.commit()
    b.close()
    return d / "a.db", d / "b.db"


def _ollama(url: str) -> str:
    return (f'[campaign]\nname = "ollama"\nprompt_classes = ["short"]\nrepetitions = 2\nmax_tokens = 8\n'
            f'[server]\nbackend = "ollama"\nurl = "{url}"\n[[models]]\nname = "gemma4"\n')


def _counts(db, run_id: int) -> dict:
    def q(sql: str) -> int:
        return db.execute(sql, [run_id] * sql.count("?")).fetchone()[0]

    in_run = "select id from loads where run_id = ?"
    return {
        "samples": q("select count(*) from samples where run_id = ?"),
        "cells": q("select count(*) from cells where run_id = ?"),
        "loads": q("select count(*) from loads where run_id = ?"),
        "gate_results": q("select count(*) from gate_results join samples s on s.id = sample_id where s.run_id = ?"),
        "lines": q(f"select count(*) from log_lines where run_id = ? or load_id in ({in_run})"),
        "facts": q(f"select count(*) from facts where load_id in ({in_run})"),
        "selfreports": q("select count(*) from memory_selfreports where run_id = ?"),
        # a load's boundary lines are lines of the same run
        "load_lines": q("select count(*) from loads l join log_lines ln on ln.id = l.start_line_id "
                        "where l.run_id = ? and ln.run_id = l.run_id"),
    }


def test_merge_brings_runs_in_once_with_their_evidence(two_dbs, tmp_path):
    a_path, b_path = (shutil.copy(p, tmp_path / p.name) for p in two_dbs)
    a = open_store(a_path)
    b = sqlite3.connect(b_path)
    b_run = b.execute("select id from runs").fetchone()[0]
    before = _counts(b, b_run)
    report = merge_database(a, b_path)
    assert len(report["merged"]) == 1 and not report["conflicts"] and report["llama_bench"] == 1
    new_run = report["merged"][0]["run_id"]
    assert _counts(a.db.conn, new_run) == before and before["samples"] == 2 and before["selfreports"] == 1
    run = a.db["runs"].get(new_run)
    assert run["host"] == "other-host" and run["merged_from"].startswith("other-host:")
    # pointers land on the merged rows, not on this database's own rows
    assert a.db.execute("select count(*) from gate_results g join samples s on s.id = g.sample_id "
                        "where s.run_id = ?", [new_run]).fetchone()[0] == before["gate_results"]
    assert a.db.execute("select count(*) from samples s join loads l on l.id = s.load_id where s.run_id = ? "
                        "and l.run_id = ?", [new_run, new_run]).fetchone()[0] == 2
    assert a.db.execute("select count(*) from models where name = 'gemma4'").fetchone()[0] == 1
    # again: nothing new, the run is reported as present
    again = merge_database(a, b_path)
    assert not again["merged"] and len(again["present"]) == 1 and again["llama_bench"] == 0
    assert a.db["samples"].count == _counts(a.db.conn, new_run)["samples"] + _counts(a.db.conn, 1)["samples"]
    a.close()


def test_merge_round_trip_is_idempotent_and_keeps_log_evidence(two_dbs, tmp_path):
    a_path, b_path = (shutil.copy(p, tmp_path / p.name) for p in two_dbs)
    a, b = open_store(a_path), open_store(b_path)
    a_counts = _counts(a.db.conn, 1)
    assert a_counts["lines"] > 0 and a_counts["facts"] > 0 and a_counts["load_lines"] > 0  # real log captured
    into_b = merge_database(b, a_path)  # A's run into B
    assert "dropped_pointers" not in into_b["merged"][0]  # every pointer found its merged row
    mine = b.db.execute("select id from runs where merged_from is not null").fetchone()[0]
    assert _counts(b.db.conn, mine) == a_counts
    assert b.db.execute("select count(*) from log_sources where name like 'merged:%'").fetchone()[0] >= 1
    back = merge_database(a, b_path)  # B now holds A's run too: only B's own run is new for A
    assert len(back["merged"]) == 1 and len(back["present"]) == 1
    assert a.db["runs"].count == 2
    a.close(), b.close()


def test_merge_reports_a_conflict_and_keeps_our_copy(two_dbs, tmp_path):
    a_path, b_path = (shutil.copy(p, tmp_path / p.name) for p in two_dbs)
    a = open_store(a_path)
    merge_database(a, b_path)
    other = sqlite3.connect(b_path)
    other.execute("update runs set status = 'interrupted', samples_measured = 1")
    other.execute("insert into runs (campaign_id, host, started_at, status) select campaign_id, 'x', "
                  "'2030-01-01T00:00:00+00:00', 'running' from runs limit 1")
    other.commit(), other.close()
    report = merge_database(a, b_path)
    assert len(report["conflicts"]) == 1
    c = report["conflicts"][0]
    assert c["differs"]["status"] == ["completed", "interrupted"] and c["kept"] == "this database's copy"
    assert a.db["runs"].get(c["run_id"])["status"] == "completed"
    assert report["skipped"][0]["reason"].startswith("still running")
    assert a.db.execute("select conflicts from merges order by id desc").fetchone()[0] == 1
    a.close()
    res = CliRunner().invoke(cli, ["merge", str(b_path), "--db", str(a_path)])
    assert res.exit_code == 3 and "conflict: run" in res.output


def test_merge_brings_rows_of_tables_it_does_not_know(two_dbs, tmp_path):
    """A feature's own table (probes, say) comes along when it points at the run's rows."""
    a_path, b_path = (shutil.copy(p, tmp_path / p.name) for p in two_dbs)
    for path in (a_path, b_path):
        with sqlite3.connect(path) as c:
            c.execute("create table extra_notes (id integer primary key, run_id int, sample_id int, note text)")
    with sqlite3.connect(b_path) as c:
        run, sample = c.execute("select run_id, id from samples order by id limit 1").fetchone()
        c.execute("insert into extra_notes (run_id, sample_id, note) values (?, ?, 'seen')", [run, sample])
    a = open_store(a_path)
    report = merge_database(a, b_path)
    new_run = report["merged"][0]["run_id"]
    note = a.db.execute("select run_id, sample_id, note from extra_notes").fetchone()
    assert note[0] == new_run and note[2] == "seen"
    assert a.db.execute("select run_id from samples where id = ?", [note[1]]).fetchone()[0] == new_run
    a.close()


def test_merge_errors_name_the_file(tmp_path, two_dbs):
    runner = CliRunner()
    db = tmp_path / "t.db"
    missing = runner.invoke(cli, ["merge", str(tmp_path / "none.db"), "--db", str(db)])
    assert missing.exit_code == 1 and f"{tmp_path / 'none.db'}: no such database" in missing.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    res = runner.invoke(cli, ["merge", str(junk), "--db", str(db)])
    assert res.exit_code == 1 and str(junk) in res.output and res.output.strip().count("\n") == 0
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).execute("create table x (a)").connection.commit()
    res = runner.invoke(cli, ["merge", str(empty), "--db", str(db)])
    assert res.exit_code == 1 and "not a cardproof database" in res.output
    store = open_store(db)
    with pytest.raises(MergeError, match="target database itself"):
        merge_database(store, db)
    store.close()
    ok = runner.invoke(cli, ["merge", str(two_dbs[1]), "--db", str(db)])
    assert ok.exit_code == 0 and "1 runs merged" in ok.output


@pytest.mark.parametrize("dirname", ["odd #1", "what?mode=rw", "pct%41x", "sp ace"])
def test_merge_source_path_with_uri_characters(tmp_path, dirname):
    """A database under a folder whose name holds URI characters (``#``, ``?``, ``%``) is opened as that
    file, read-only: a plain ``file:{path}`` URI cut the path at ``#``/``?`` or decoded ``%41``."""
    from cardproof.daemon.store.merge import open_source

    folder = tmp_path / dirname
    folder.mkdir()
    src = open_store(folder / "src.db")
    src.close()
    conn = open_source(folder / "src.db")
    try:
        assert {"runs", "campaigns", "samples"} <= {r[0] for r in conn.execute("select name from sqlite_master")}
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("create table t (a)")
    finally:
        conn.close()
