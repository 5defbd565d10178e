"""``cardproof status`` where no daemon has ever run is not an error (exit 0, documented).

Real parts: the real CLI and a real SQLite store.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_status_without_any_daemon_exits_0_saying_so_and_documents_it(tmp_path):
    db = tmp_path / "never.db"
    res = _invoke("status", "--db", db)
    assert res.exit_code == 0 and res.stdout.startswith("daemon: no daemon has run"), res.output
    assert not db.exists()  # a look does not create a database
    res = _invoke("status", "--db", db, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["daemon"]["verdict"] == "never started"
    open_store(db).close()  # an existing database that no daemon has written to
    res = _invoke("status", "--db", db)
    assert res.exit_code == 0 and "no daemon has run" in res.stdout and "queue: empty" in res.stdout
    res = _invoke("status", "--db", db, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["daemon"]["verdict"] == "never started"
    helptext = " ".join(_invoke("status", "--help").stdout.split())
    assert "no daemon has run" in helptext and "0 when" in helptext and "3 when" in helptext
