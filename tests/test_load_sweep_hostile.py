"""Damaged or hostile load-step rows never stop the build: each is named, read as NULL, or shown as text.

Real parts: a real sweep and depth run against the ``--parallel 4``
llama-server, the SQLite file damaged by hand afterwards, the real
``cardproof report build`` with ``mkdocs build --strict``.
"""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from test_load_sweep import parallel_server  # noqa: F401 -- the shared --parallel 4 server fixture

PAYLOAD = '<img src=x onerror="window.__pwned=1"> **bold** [link](javascript:alert(1)) {{ 7*7 }}'


def test_damaged_and_hostile_step_rows_are_named_and_the_site_still_builds(parallel_server, tmp_path):  # noqa: F811
    db = tmp_path / "h.db"
    store = open_store(db)
    text = (campaign_text(parallel_server.url, reps=1)
            + "\n[load]\nstreams = [1, 2, 4]\nrequests_per_stream = 2\n[load.slo]\nttft_p90_ms = 5000\n"
            + "[depth]\ntokens = [0, 5000]\nrepetitions = 1\n")
    run_id = run_campaign(store, parse_campaign(text), echo=lambda s: None).run_id
    store.close()
    conn = sqlite3.connect(db)
    with conn:
        steps = [r[0] for r in conn.execute("select id from load_steps where axis = 'load' order by position")]
        conn.execute("update load_steps set streams = 'abc' where id = ?", [steps[0]])
        conn.execute("update load_steps set wall_s = 'slow' where id = ?", [steps[1]])
        conn.execute("update load_steps set total_slots = 1e300 where id = ?", [steps[2]])
        conn.execute("update load_samples set itl_ms_json = '{not json' where step_id = ?", [steps[1]])
        conn.execute("update load_samples set queue_ms = 'soon' where step_id = ?", [steps[2]])
        # a row as a cardproof before m018 stored it: English only, shown quoted
        conn.execute("update load_steps set refused_reason = ?, refused_json = null where refused_reason is not null",
                     [PAYLOAD])
        # the campaign as the run froze it, damaged: every reader of the parsed campaign reads it as unreadable
        conn.execute("update campaigns set campaign_json = ?", ['{"version": 99, "load": {"slo": "bogus"}}'])
    project = tmp_path / "proj"
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 0, (result.output, result.stderr)
    for what in ("load_steps", "streams", "wall_s", "total_slots", "queue_ms"):
        assert what in result.stderr
    md = (project / "site" / "runs" / f"run-{run_id}.md").read_text()
    load = md[md.index("## Load: concurrent streams"):md.index("## Context depth")]
    assert "| — |" in load  # the damaged streams read as no figure, not as a crash or 'None'
    assert "None" not in load
    assert "no service level shown" in result.stderr  # the frozen campaign no longer reads: said, not guessed
    assert "## Context depth" in md and PAYLOAD not in md  # the refusal text is escaped, not pasted
    html = (project / "build" / "site" / "runs" / f"run-{run_id}.html").read_text()
    context = html[html.index("Context depth"):]
    assert "&lt;img src=x" in context and "<img src=x" not in html and 'href="javascript' not in html
    assert "{{ 7*7 }}" in context  # shown as written, never evaluated
