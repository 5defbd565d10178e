"""Liveness end to end: ``cardproof run`` as a real process against the real
llama-server, SIGKILLed at seeded random points (one before its first sample),
then ``cardproof runs``, ``report build`` with ``mkdocs build --strict``, a
following completed run and ``cardproof compare`` read the dead runs.
"""

from __future__ import annotations

import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from cardproof.cli import cli
from conftest import campaign_text, unload_all

PLANNED = 20


def _cardproof(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cardproof.cli", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _q(db: Path, sql: str, args=()):
    con = sqlite3.connect(db, timeout=10)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _kill_run(db: Path, camp: Path, after_samples: int, delay_s: float) -> tuple[int, int]:
    """Start a run, SIGKILL it once it stored ``after_samples`` (0: right after its row exists).

    Returns the run id and the samples it had stored.
    """
    before = _q(db, "select coalesce(max(id), 0) from runs")[0][0] if db.exists() else 0
    proc = _cardproof("run", str(camp), "--db", str(db))
    run_id = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            row = _q(db, "select max(id) from runs")[0][0]
            if row and row > before:
                run_id = row
                n = _q(db, "select count(*) from samples where run_id = ?", [run_id])[0][0]
                if n >= after_samples:
                    time.sleep(delay_s)  # lands in the next request or the step after it
                    break
        time.sleep(0.005)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()}"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    stored = _q(db, "select count(*) from samples where run_id = ?", [run_id])[0][0]
    return run_id, stored


def _runs_line(db: Path, run_id: int) -> str:
    out = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.split()[0] == str(run_id))
    return "\n".join(lines[i:i + 2])


def test_sigkilled_runs_never_look_finished(llama_server, tmp_path):
    url = llama_server.url
    camp = tmp_path / "c.toml"
    camp.write_text(campaign_text(url, models=("tiny-a",), classes=("short",), reps=PLANNED, max_tokens=4))
    db = tmp_path / "k.db"
    first = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert first.exit_code in (0, 3), first.output
    rng = random.Random(16)
    points = [(0, 0.0)] + [(rng.randint(1, PLANNED - 2), rng.uniform(0.0, 0.03)) for _ in range(3)]
    killed = {}
    for after, delay in points:
        if after == 0:
            unload_all(url)  # the first load is the window between the run's row and its first sample
        run_id, stored = _kill_run(db, camp, after, delay)
        if after == 0:
            assert stored == 0, "the kill meant for before the first sample came too late"
        killed[run_id] = stored
        measured = _q(db, "select count(*) from samples where run_id = ? and error_kind is null", [run_id])[0][0]
        line = _runs_line(db, run_id)
        assert "interrupted" in line.splitlines()[0], line
        assert f"({measured}/{PLANNED})" in line and "process gone (pid" in line, line
        assert _q(db, "select status from runs where id = ?", [run_id])[0][0] == "running"  # shown, not written

    project = tmp_path / "site"
    build = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert build.exit_code == 0, build.output
    for run_id in killed:
        en = (project / "site" / "runs" / f"run-{run_id}.md").read_text()
        de = (project / "site" / "runs" / f"run-{run_id}.de.md").read_text()
        top = en.split("## The numbers")[0]
        assert '!!! danger "Interrupted"' in top and "No headline: the run did not finish." in top
        assert "tok/s" not in top.split("## Headline")[1]
        assert '!!! danger "Abgebrochen"' in de and "Kein Ergebnis in einem Satz" in de
        assert "Not compared: the run did not finish." in en
    index = (project / "site" / "runs" / "index.md").read_text()
    for run_id in killed:
        assert re.search(rf"\[{run_id}\]\(run-{run_id}\.md\) \|[^\n]*\| interrupted \|", index), index
    assert not list((project / "site" / "compare").glob("run-*.md"))  # no comparison with a dead run

    last = CliRunner().invoke(cli, ["run", str(camp), "--db", str(db)])
    assert last.exit_code in (0, 3), last.output
    last_id = _q(db, "select max(id) from runs")[0][0]
    for run_id, stored in killed.items():  # the next run wrote what the readers showed
        status, measured, planned, coverage, ended, error = _q(
            db, "select status, samples_measured, samples_planned, coverage, ended_at, error_text "
                "from runs where id = ?", [run_id])[0]
        ok = _q(db, "select count(*) from samples where run_id = ? and error_kind is null", [run_id])[0][0]
        last_sample = _q(db, "select max(started_at) from samples where run_id = ?", [run_id])[0][0]
        assert status == "interrupted" and measured == ok and coverage == ok / planned
        assert ended and (last_sample is None or ended >= last_sample) and "process gone (pid" in error
    build = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert build.exit_code == 0, build.output
    article = (project / "site" / "runs" / f"run-{last_id}.md").read_text()
    assert "Compared with run [1](run-1.md)" in article and '!!! danger' not in article.split("## Headline")[0]
    assert sorted(p.name for p in (project / "site" / "compare").glob("run-*.md")) == [
        f"run-{last_id}-vs-1.de.md", f"run-{last_id}-vs-1.md"]
    models = (project / "site" / "runs" / "index.md").read_text().split("## Models across runs")[1]
    assert not any(f"[Run {rid}]" in models for rid in killed) and f"[Run {last_id}]" in models

    explicit = CliRunner().invoke(cli, ["compare", "1", str(max(killed)), "--db", str(db)])
    assert explicit.exit_code == 0 and f"note: run {max(killed)} did not finish (interrupted" in explicit.output

    assert _q(db, "pragma integrity_check") == [("ok",)]
    assert _q(db, "select cell_id, repetition, count(*) from samples group by 1, 2 having count(*) > 1") == []
    assert _q(db, "select count(*) - count(distinct nonce) from samples") == [(0,)]
    assert not list(tmp_path.glob("*.lock"))


def test_a_live_run_reads_running_with_the_coverage_stored_so_far(llama_server, tmp_path):
    """Another connection, mid-run, sees the runner's lock held and the samples stored so far."""
    from cardproof.daemon.campaign.model import parse_campaign
    from cardproof.daemon.run.runner import run_campaign
    from cardproof.daemon.store import open_store
    from cardproof.report.queries import runs as q_runs

    db = tmp_path / "live.db"
    store = open_store(db)
    camp = parse_campaign(campaign_text(llama_server.url, models=("tiny-a",), reps=4, max_tokens=4), "c.toml")
    seen = []

    def echo(line: str) -> None:
        if line.startswith("[2/4]"):
            reader = open_store(db)
            seen.append(q_runs(reader.db)[0])
            reader.close()

    outcome = run_campaign(store, camp, echo=echo)
    assert outcome.status == "completed" and len(seen) == 1
    live = seen[0]
    assert live["status"] == "running" and "holds the run's lock" in live["liveness"]
    assert live["samples_measured"] + live["samples_failed"] == 2  # the third request is not sent yet
    assert live["coverage"] == live["samples_measured"] / 4
    assert not list(tmp_path.glob("*.lock"))
    assert q_runs(store.db)[0]["status"] == "completed" and "liveness" not in q_runs(store.db)[0]
