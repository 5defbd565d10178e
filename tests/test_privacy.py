"""Client addresses from access logs are masked in the published site by default."""

from __future__ import annotations

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.privacy import mask_ip
from conftest import campaign_text


def test_mask_ip():
    assert mask_ip("192.168.1.5") == "192.168.1.x"
    assert mask_ip("127.0.0.1") == "127.0.0.1"
    assert mask_ip("2001:db8:85a3::8a2e:370:7334") == "2001:0db8:85a3:x"
    assert mask_ip("not-an-ip") == "x"
    assert mask_ip(None) == "—"


def test_article_masks_access_log_clients_unless_opted_out(llama_server, tmp_path):
    db = tmp_path / "p.db"
    store = open_store(db)
    outcome = run_campaign(store, parse_campaign(campaign_text(llama_server.url, reps=1), "p.toml"),
                           echo=lambda s: None)
    # GIN access lines as Ollama writes them, stored the way the log capture stores them
    for client in ("192.168.1.5", "192.168.1.7", "192.168.1.5"):
        store.insert("requests_seen", {"run_id": outcome.run_id, "ts": "2025-08-07 18:27:18", "client": client,
                                       "method": "POST", "path": "/api/chat", "status": 200, "source": "recorded"})
    store.close()
    project = tmp_path / "proj"
    assert CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project),
                                    "--no-mkdocs"]).exit_code == 0
    text = (project / "site" / "runs" / f"run-{outcome.run_id}.md").read_text()
    assert "`192.168.1.x` | 2 |" in text and "`192.168.1.x` | 1 |" in text
    assert "192.168.1.5" not in text and "192.168.1.7" not in text
    de = (project / "site" / "runs" / f"run-{outcome.run_id}.de.md").read_text()
    assert "192.168.1.5" not in de and "Anfragen anderer Clients" in de
    assert CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project), "--no-mkdocs",
                                    "--show-client-addresses"]).exit_code == 0
    text = (project / "site" / "runs" / f"run-{outcome.run_id}.md").read_text()
    assert "`192.168.1.5` | 2 |" in text
