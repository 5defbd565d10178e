"""Pre-registration: `cardproof register` freezes a campaign before a real run, the article says how long before.

A real run against the real llama-server, real SQLite. The two-days-earlier
registration is made by moving the stored registration time back (a test
cannot wait two days); everything else is as the commands stored it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import load_campaign
from cardproof.daemon.campaign.registration import check_before_run, link_run
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text

RULE = '\n[rules]\nfast = "decode.short >= 1"\n'


def _article(db, project) -> str:
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    rid = open_store(db, mode="ro").db.execute("select max(id) from runs").fetchone()[0]
    return (project / "site" / "runs" / f"run-{rid}.md").read_text(), (project / "site" / "runs" / f"run-{rid}.de.md").read_text()


def test_registered_days_before_and_at_run_start(llama_server, tmp_path):
    db = tmp_path / "r.db"
    path = tmp_path / "c.toml"
    path.write_text(campaign_text(llama_server.url, reps=2) + RULE)
    result = CliRunner().invoke(cli, ["register", str(path), "--db", str(db)])
    assert result.exit_code == 0 and "registered as 1 at" in result.output, result.output
    again = CliRunner().invoke(cli, ["register", str(path), "--db", str(db)])
    assert again.exit_code == 0 and "already registered as 1" in again.output
    store = open_store(db)
    two_days_ago = (datetime.fromisoformat(store.db["registrations"].get(1)["registered_at"])
                    - timedelta(days=2, minutes=1)).isoformat()
    store.db.execute("update registrations set registered_at = ? where id = 1", [two_days_ago])
    store.db.conn.commit()
    camp = load_campaign(path)
    assert check_before_run(store.db, camp).startswith("campaign registered at ")
    outcome = run_campaign(store, camp, echo=lambda s: None)
    assert link_run(store, outcome.run_id, camp)["id"] == 1
    assert store.db["runs"].get(outcome.run_id)["registration_id"] == 1
    store.close()
    en, de = _article(db, tmp_path / "p1")
    assert "The campaign was registered 2 days before the run" in en
    assert "Die Kampagne wurde 2 Tage vor dem Lauf registriert" in de
    assert "Fixed before the run: the campaign text was registered at " in en
    assert "Vor dem Lauf festgelegt: Der Kampagnentext wurde am " in de

    # the file changes after its registration: the run counts as registered at its start, and says why
    path.write_text(campaign_text(llama_server.url, reps=1) + RULE)
    store = open_store(db)
    changed = load_campaign(path)
    assert "changed since its registration 1" in check_before_run(store.db, changed)
    outcome = run_campaign(store, changed, echo=lambda s: None)
    assert link_run(store, outcome.run_id, changed) is None
    store.close()
    en, _ = _article(db, tmp_path / "p2")
    assert "Registered at run start: no registration of this campaign text was made before the run" in en
    assert "days before the run" not in en
    # one plain statement of when the rules were fixed: never "before the run" beside "no registration"
    assert "Fixed when the run started: the campaign text was frozen" in en
    assert "Fixed before the run" not in en and "Pass rules, written before the run" not in en
    assert "frozen with the campaign before the run" not in en


def test_register_refuses_an_invalid_campaign(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[campaign]\nrepetitions = 0\n")
    result = CliRunner().invoke(cli, ["register", str(bad), "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 2 and "bad.toml" in result.output and result.output.strip().count("\n") == 0


def test_cardproof_run_links_its_registration(llama_server, tmp_path):
    db = tmp_path / "r.db"
    path = tmp_path / "c.toml"
    path.write_text(campaign_text(llama_server.url, reps=1))
    assert CliRunner().invoke(cli, ["register", str(path), "--db", str(db)]).exit_code == 0
    result = CliRunner().invoke(cli, ["run", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "campaign registered at " in result.output  # stderr is mixed in
    assert open_store(db, mode="ro").db.execute("select registration_id from runs").fetchone()[0] == 1
