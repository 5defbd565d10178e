"""The fit table of the article's Context section, in both languages, every figure linked to its log line.

Real parts: the real llama-server (CPU: "not on a card"), SQLite, ``cardproof
report build`` with ``mkdocs build --strict``. The "fits" and "does not fit"
rows of the same run read recorded logs and recorded NVML readings (no NVIDIA
GPU here; tests/fixtures/fit/README.md), their request answered by the real server.
"""

from __future__ import annotations

import re
import sqlite3

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.load.fit import fit_model
from cardproof.daemon.campaign.tables.fit import FitSettings
from cardproof.daemon.memory import RecordedSource
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from memory_support import FIXTURES as NVML, StandIn
from test_fit import REAL_5090, RECORDED, _recorded_launch, _recorded_model


@pytest.fixture(scope="module")
def fit_db(llama_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fitart")
    db = tmp / "fit.db"
    store = open_store(db)
    text = campaign_text(llama_server.url, reps=1) + "\n[fit]\ncontexts = [2048, 8192, 32768]\n"
    out = run_campaign(store, parse_campaign(text), echo=lambda s: None)
    assert out.status == "completed"
    model_id = store.db.execute("select id from models where name = 'tiny-a'").fetchone()[0]
    dev = tmp / "dev"
    dev.mkdir()
    server = StandIn(dev / "nvidia0")
    try:
        source = RecordedSource(NVML / "fit_rtx5090.json", pids={"SERVER": server.pid}, device_prefixes=[str(dev)])
        common = dict(store=store, run_id=out.run_id, model="tiny-a", model_id=model_id,
                      model_file=str(_recorded_model(tmp)), echo=lambda s: None)
        fit_model(**common, settings=FitSettings(contexts=[131072]), source=source,
                  launch=_recorded_launch(REAL_5090, llama_server.url, server.pid))
        two_cards = RecordedSource(NVML / "fit_two_3090.json", pids={"SERVER": server.pid},
                                   device_prefixes=[str(dev)])
        fit_model(**common, settings=FitSettings(contexts=[262144]), source=two_cards,
                  launch=_recorded_launch(RECORDED / "partial_offload_kv_cpu.log", llama_server.url, server.pid))
        # no card reading: the verdict rests on the log alone and the article says so
        fit_model(**common, settings=FitSettings(contexts=[65536]), source=None,
                  launch=_recorded_launch(REAL_5090, llama_server.url, server.pid))
    finally:
        server.stop()
    store.close()
    return db, out.run_id


def _build(db, project):
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 0, result.output


def test_fit_table_in_both_languages_with_every_figure_linked(fit_db, tmp_path):
    db, run_id = fit_db
    project = tmp_path / "proj"
    _build(db, project)
    conn = sqlite3.connect(db)
    verdicts = [v for (v,) in conn.execute("select verdict from fit_checks where run_id = ? order by position",
                                           [run_id])]
    assert verdicts == ["not_on_card", "not_on_card", "refused", "fits", "does_not_fit", "fits"]
    evidence = (project / "site" / "runs" / f"run-{run_id}-evidence.md").read_text()
    anchors = set(re.findall(r'<span id="line-(\d+)"></span>', evidence))
    for lang, suffix, words in (
            ("en", "", {"title": "### Fit on the cards", "fits": "**fits**", "no": "**does not fit**",
                        "cpu": "**not on a card**", "refused": "**refused**: context 32,768 tokens exceeds",
                        "largest": "Largest context that fits: 131,072 tokens.", "ctx": "131,072",
                        "layers": "7 of 65 layers on the CPU", "kv": "KV cache on the CPU: 1,024 MiB",
                        "partial": "partial evidence: no card memory reading",
                        "share": "69.6\u00a0%", "free": "9,407 MiB",
                        "host": "| in host memory | server process peak |", "host_fits": "| **fits** | "}),
            ("de", ".de", {"title": "### Passt auf die Karten", "fits": "**passt**", "no": "**passt nicht**",
                           "cpu": "**nicht auf einer Karte**",
                           "refused": "**abgelehnt**: Kontext 32.768 Token übersteigt",
                           "largest": "Größter Kontext, der passt: 131.072 Token.", "ctx": "131.072",
                           "layers": "7 von 65 Schichten auf der CPU", "kv": "KV-Cache auf der CPU: 1.024 MiB",
                           "partial": "unvollständige Belege: kein Kartenspeicher gelesen",
                           "share": "69,6\u00a0%", "free": "9.407 MiB",
                           "host": "| im Arbeitsspeicher | Spitze des Serverprozesses |",
                           "host_fits": "| **passt** | "})):
        md = (project / "site" / "runs" / f"run-{run_id}{suffix}.md").read_text()
        fit = md[md.index(words["title"]):]
        fit = fit[:fit.index("\n## ")]
        for key, text in words.items():
            assert text in fit, (lang, key, text)
        # every linked figure points at a log line printed on the evidence page
        links = re.findall(rf"\]\(run-{run_id}-evidence\.md#line-(\d+)\)", fit)
        assert len(links) >= 5 * 4 and set(links) <= anchors
        # the recorded CUDA0 KV figure links to the very line it was read from
        kv_line = conn.execute("select raw from log_lines where id = ?", [int(re.search(
            rf"\[(?:4[.,]624[.,]0) MiB\]\(run-{run_id}-evidence\.md#line-(\d+)\)", fit)[1])]).fetchone()[0]
        assert "CUDA0 KV buffer size =  4352.00 MiB" in kv_line
        # a device's buffers link to that device's own line
        cuda1 = re.search(rf"\[CUDA1 [\d.,]+ MiB\]\(run-{run_id}-evidence\.md#line-(\d+)\)", fit)[1]
        assert "CUDA1" in conn.execute("select raw from log_lines where id = ?", [int(cuda1)]).fetchone()[0]


def test_damaged_fit_rows_are_shown_escaped_and_never_stop_the_build(fit_db, tmp_path):
    """Rows a damaged or hostile database holds: text where numbers belong, broken JSON, markup in a verdict."""
    db, run_id = fit_db
    hostile = tmp_path / "hostile.db"
    hostile.write_bytes(db.read_bytes())
    conn = sqlite3.connect(hostile)
    model_id = conn.execute("select id from models where name = 'tiny-a'").fetchone()[0]
    rows = [
        {"context_tokens": "lots", "verdict": "<script>alert(1)</script>", "buffers_json": "[1, 2]",
         "evidence_json": "{", "reasons_json": "not json", "reasons_text": "**bold** <b>x</b>"},
        {"context_tokens": 4096, "verdict": "fits", "buffers_json": '{"CUDA0": {"kv_buffer_mib": "x"}, "a|b": 3}',
         "evidence_json": '{"kv": ["<x>"], "ctx": [1e999], "missing": "all"}', "resident_mib": "1e9",
         "card_total_mib": 0, "free_mib": float("nan")},
    ]
    for i, r in enumerate(rows):
        cols = {"run_id": run_id, "model_id": model_id, "position": 100 + i, **r}
        conn.execute(f"insert into fit_checks ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                     list(cols.values()))
    conn.commit()
    project = tmp_path / "proj"
    _build(hostile, project)
    md = (project / "site" / "runs" / f"run-{run_id}.md").read_text()
    fit = md[md.index("### Fit on the cards"):]
    fit = fit[:fit.index("\n## ")]
    assert "<script>" not in fit and "<b>x</b>" not in fit
    assert "&lt;script&gt;" in fit or "\\<script" in fit
    assert "| **fits** |" in fit  # the damaged figures print as dashes, the row is still there
