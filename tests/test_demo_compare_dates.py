"""Comparing runs across dates as a user does: the demo's path twice in one project.

Real parts: the demo's own path (``run_demo``: a router-mode llama-server and an
embedding server on ephemeral ports, the campaign, the log capture, the report
and the site), real SQLite, tiny random-weight models. Between the two runs the
two model files swap names, so the model that was fastest in run 1 is the slower
one in run 2 by construction (``SLOW`` has some 130 times tiny-a's parameters), not
by the machine's mood; everything else stays, except the servers' ports.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3

import pytest

from cardproof import __version__
from cardproof.daemon.server.tinymodels import TinySpec, write_model
from cardproof.demo import run_demo

#: the slow model: some 55 M parameters against tiny-a's 0.4 M. On one thread a loaded two-core machine
#: (load average 10) decoded tiny-a at 700-12,400 tok/s and this one at 80-220 tok/s: every sample of
#: one is faster than every sample of the other, and run 1 states a measurable headline. (On two threads
#: the same machine scattered tiny-a's samples from 5 to 6,400 tok/s: the threads wait for each other
#: whenever the scheduler takes one away.)
SLOW = TinySpec("slow", n_embd=1024, n_layer=6, n_ff=2048, n_head=8, n_head_kv=4, vocab="full", seed=5)

CAMPAIGN = """\
[campaign]
name = "demo-dates"
prompt_classes = ["short"]
reasoning = [false]
repetitions = 5
max_tokens = 48

[gates.length_limit]
exclude = false
[gates.not_on_card]
exclude = false

# A loaded two-core machine scatters the slow model's samples beyond the default limit of 1.5 (memory
# bandwidth shared with other processes); this test is about the comparison of two runs, not stable cells.
[report]
unstable_ratio = 100.0

[server]
backend = "llama-server"
url = "{url}"
request_timeout_s = 120
log_file = "{log_file}"

{embedding}
[[models]]
name = "tiny-a"

[[models]]
name = "tiny-b"
"""


def _warning(md: str) -> str:
    """The body of the page's "Measured under different conditions" box ('' where there is none)."""
    head = '!!! warning "Measured under different conditions"\n'
    if head not in md:
        return ""
    body = md.split(head, 1)[1]
    return "\n".join(line for line in body.splitlines() if line.startswith("    "))


def _cell(db, run_id: int, model: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("select cells.id from cells join models on models.id = cells.model_id "
                            "where cells.run_id = ? and models.name = ? and cells.kind = 'measure'",
                            [run_id, model]).fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory):
    return write_model(SLOW, tmp_path_factory.mktemp("slow") / "slow.gguf")


def test_two_demo_runs_name_only_real_differences_and_say_the_headline_did_not_hold(tiny_models, slow_model,
                                                                                   tmp_path):
    small, big = tiny_models["tiny-a"], slow_model
    work, project = tmp_path / "demo", tmp_path / "proj"
    said: list[str] = []
    # the first file is also the embedding server's model: the small one both times
    first = run_demo(work, project, echo=said.append, models={"tiny-a": small, "tiny-b": big}, campaign=CAMPAIGN,
                     threads=1)
    second = run_demo(work, project, echo=said.append, models={"tiny-b": small, "tiny-a": big}, campaign=CAMPAIGN,
                      threads=1)
    assert (first["run_id"], second["run_id"]) == (1, 2) and first["db"] == second["db"], said[-5:]
    db, site = second["db"], project / "site"

    # the comparison page from run 2 to run 1: the model files differ, and they are named as such;
    # the servers' new ports are said in small print, never as different conditions
    page = (site / "compare" / "run-2-vs-1.md").read_text()
    box = _warning(page)
    assert "**tiny-a**: file digest:" in box and "**tiny-b**: file digest:" in box, page
    assert "port of" not in box and "path of" not in box and "campaign file" not in box, box
    small_print = re.search(r"<small>Different, but unable to move a figure: (.*)</small>", page)
    assert small_print and "port of `server.url`" in small_print.group(1), page
    assert "port of `embedding.url`" in small_print.group(1)
    german = (site / "compare" / "run-2-vs-1.de.md").read_text()
    assert "Verschieden, aber ohne Einfluss auf eine Zahl: Port von `embedding.url`" in german
    assert "Port von `server.url`" in german

    # run 2's article says that run 1's headline did not hold, linked to both runs' cells
    a1, b2 = _cell(db, 1, "tiny-a"), _cell(db, 2, "tiny-b")
    article = (site / "runs" / "run-2.md").read_text()
    section = article.split("## Comparison with earlier runs", 1)[1].split("\n## ", 1)[0]
    assert "**The headline of run 1 did not hold in this run.**" in section, section
    assert (f"**did not hold**: [tiny-a](run-1-evidence.md#cell-{a1}) was the fastest in run 1, "
            f"[tiny-b](run-2-evidence.md#cell-{b2}) in this run") in section, section
    assert "port of `server.url`" in section and "port of" not in _warning(section)
    german = (site / "runs" / "run-2.de.md").read_text()
    assert "**Das Ergebnis in einem Satz von Lauf 1 hat sich in diesem Lauf nicht bestätigt.**" in german
    assert (f"**nicht bestätigt**: [tiny-a](run-1-evidence.md#cell-{a1}) war in Lauf 1 am schnellsten, "
            f"[tiny-b](run-2-evidence.md#cell-{b2}) in diesem Lauf") in german

    # a trend page per model, two points per series (one a run), and the site built from it all
    for model in ("tiny-a", "tiny-b"):
        with (site / "trends" / f"trend-demo-dates-{model}.csv").open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["cell_kind"] == "measure"]
        assert sorted(r["run"] for r in rows) == ["1", "2"], rows
        trend = (site / "trends" / f"trend-demo-dates-{model}.md").read_text()
        changed = trend.split("## What changed", 1)[1].split("\n## ", 1)[0]
        assert "file digest:" in changed and "<small>Different, but unable to move a figure:" in changed, changed
        assert "campaign file" not in changed
    assert second["site"].exists()
    # each run's row keeps the cardproof that measured and the machine, which the comparison reads
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("select cardproof_version, host_json from runs order by id").fetchall()
    finally:
        conn.close()
    assert [r[0] for r in rows] == [__version__, __version__]
    for _, host in rows:
        host = json.loads(host)
        assert host["cpus"] >= 1 and set(host["load_1m"]) == {"start", "end"}, host
