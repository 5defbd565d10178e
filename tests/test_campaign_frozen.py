"""A run's campaign is parsed once, when frozen, and every later reader takes that parsed form."""

from __future__ import annotations

import json
from pathlib import Path

import sqlite_utils

from cardproof.daemon.campaign import frozen
from cardproof.daemon.campaign.frozen import frozen_campaign, from_normalised, normalised
from cardproof.daemon.campaign.model import Campaign, parse_campaign
from cardproof.daemon.run.record import register_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.store.migrations import migrations

EXAMPLE = (Path(__file__).resolve().parents[1] / "data" / "campaigns" / "example.toml").read_text()

#: every table whose value is a pydantic model in the Campaign: the axes, fit, variants, quality, probes
RICH = """
[campaign]
name = "rich"
prompt_classes = ["short"]
reasoning = [false, true]
repetitions = 2
[server]
backend = "llama-server"
url = "http://127.0.0.1:8080"
[[models]]
name = "a"
[[models]]
name = "b"
[gates.load_time]
threshold = 2.5
exclude = false
[probes]
run = ["tools"]
[rules]
fast = "decode.short > 1"
[expectations]
guess = "decode.short > 2"
another = "decode.short > 3"
[load]
streams = [1, 2]
requests_per_stream = 2
[depth]
tokens = [0, 512]
[fit]
contexts = [4096]
[variants]
threads = [2, 4]
[variants.sets]
kv8 = ["--cache-type-k", "q8_0"]
[report]
unstable_ratio = 2.0
"""


def _same(a: Campaign, b: Campaign) -> None:
    for name in Campaign.__dataclass_fields__:
        if name not in ("text", "sha256", "path"):
            assert getattr(a, name) == getattr(b, name), name
    assert json.dumps(normalised(a)) == json.dumps(normalised(b))  # in order too: rules are stated in it


def test_a_parsed_campaign_reads_back_as_the_same_campaign():
    for text in (EXAMPLE, RICH):
        camp = parse_campaign(text, "c.toml")
        data = json.loads(json.dumps(normalised(camp)))  # through JSON, as the store holds it
        _same(from_normalised(data, text), camp)
    assert parse_campaign(RICH).sections["variants"] is not None  # the rich text reaches every table


def test_readers_take_the_form_parsed_when_frozen_not_the_text(tmp_path):
    """Editing the stored text (or changing the parser) no longer changes how the run reads."""
    store = open_store(tmp_path / "f.db")
    cid = register_campaign(store, parse_campaign(RICH, "rich.toml"))
    run_id = store.insert("runs", {"campaign_id": cid, "status": "completed", "started_at": "t"})
    store.db.execute("update campaigns set toml_text = ? where id = ?",
                     [RICH.replace("threshold = 2.5", "threshold = 9.0"), cid])
    from cardproof.report.gates import run_gate_config

    assert run_gate_config(store.db, run_id)["load_time"].threshold == 2.5
    assert frozen_campaign(store.db, run_id=run_id).rules == {"fast": "decode.short > 1"}
    assert list(frozen_campaign(store.db, run_id=run_id).expectations) == ["guess", "another"]  # as written
    store.close()


def test_the_migration_parses_old_runs_once_and_leaves_null_where_they_no_longer_parse(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    migrations.apply(db, stop_before="m031_frozen_campaign")
    db["campaigns"].insert_all([{"id": 1, "name": "ok", "toml_text": RICH},
                                {"id": 2, "name": "old", "toml_text": RICH + '\n[server2]\nx = 1\n'}])
    db.conn.close()
    store = open_store(path)
    assert "m031_frozen_campaign" in store.upgraded
    ok, old = (store.db.execute("select campaign_json from campaigns where id = ?", [i]).fetchone()[0] for i in (1, 2))
    assert old is None
    _same(frozen_campaign(store.db, campaign_id=1), parse_campaign(RICH))
    assert json.loads(ok)["version"] == frozen.VERSION
    store.close()


def test_a_damaged_parsed_form_reads_as_unreadable_not_as_a_crash(tmp_path):
    store = open_store(tmp_path / "d.db")
    cid = register_campaign(store, parse_campaign(EXAMPLE, "e.toml"))
    run_id = store.insert("runs", {"campaign_id": cid, "status": "completed", "started_at": "t"})
    for damaged in ("{", '{"version": 1}', '{"version": 99}', "[]"):
        store.db.execute("update campaigns set campaign_json = ? where id = ?", [damaged, cid])
        assert frozen_campaign(store.db, run_id=run_id) is None
    store.close()
