"""Statements the article made that its data did not carry, each provoked and shown gone.

Real parts: generated runs written into a real SQLite store as the runner writes them
(tests/findings_data.py), the load's log facts as the parsers store them, the real finding
rules and the article built by ``cardproof report build``.
"""

from __future__ import annotations

from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from cardproof.report.findings import findings_for
from cardproof.report.findings.context import CAVEAT_SETTINGS
from findings_data import M, make_run, view_of


def _build(path, project):
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(path), "--project", str(project), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    runs = project / "site" / "runs"
    return (runs / "run-1.md").read_text(), (runs / "run-1.de.md").read_text()


def _depth_run(tmp_path, facts: dict[str, object]):
    """Two models, the first with depth steps served by its first load, whose log states ``facts``."""
    path = tmp_path / "d.db"
    rid = make_run(path, [M("deep", decode=60.0, depth=[(0, 100, 60.0), (2048, 2150, 45.0)], pinned=True),
                          M("other", decode=40.0)])
    store = open_store(path)
    try:
        with store.db.conn:
            load = store.db.execute("select min(id) from loads where model_id = (select id from models "
                                    "where name = 'deep')").fetchone()[0]
            store.db.execute("update samples set load_id = ? where kind = 'depth'", [load])
            for name, value in facts.items():
                num, text = (value, None) if isinstance(value, (int, float)) else (None, value)
                store.db["facts"].insert({"load_id": load, "name": name, "value_num": num, "value_text": text})
    finally:
        store.close()
    return path, rid


def test_the_context_caveat_names_the_settings_the_load_ran_with(tmp_path):
    """Flash attention was on: it is a setting the cost holds for, not something that "would change" it."""
    path, rid = _depth_run(tmp_path, {"flash_attn": "on", "kv_cache_type_k": "f16", "kv_cache_type_v": "f16",
                                      "slots": 1.0})
    (finding,) = [f for f in findings_for(view_of(path, rid)) if f.rule == "context"]
    assert finding.caveat.text == CAVEAT_SETTINGS
    en, de = _build(path, tmp_path / "p")
    assert "The cost holds for the settings the load's log states (flash attention <q>on</q>, KV cache " \
           "<q>f16</q>/<q>f16</q>, 1 slot); with others it differs." in en
    assert "or flash attention change the cost" not in en
    assert "(Flash Attention <q>on</q>, KV-Cache <q>f16</q>/<q>f16</q>, 1 Slot)" in de


def test_without_the_settings_in_the_log_the_caveat_says_so(tmp_path):
    path, rid = _depth_run(tmp_path, {})
    en, _de = _build(path, tmp_path / "p")
    assert "and so may flash attention, which the load's log does not state." in en


def test_a_pinned_model_is_called_pinned_never_in_production(tmp_path):
    """``pinned = true`` says the campaign's author pinned it; whether it serves production nobody stored."""
    path, _rid = _depth_run(tmp_path, {})
    en, de = _build(path, tmp_path / "p")
    assert "**deep** (pinned)" in en and "| deep (pinned)<br>" in en
    assert "in production" not in en and "in Produktion" not in de
    assert "**deep** (gepinnt)" in de
