"""The server process's measured memory follows the quantisation ladder: a real model, a real router.

SmolLM2-135M-Instruct's shipped Q4_1 and the F16 made from it (daemon/server/realmodel.py), served by one
router-mode llama-server, one short cell each. There is no card here: what the memory section states
for each load is its router child as psutil reads it during the cell. The order and the size of the
difference are asserted from those stored readings, never from the file sizes, which only bound it.
"""

from __future__ import annotations

import pytest

from cardproof.daemon.server import llamacpp, realmodel
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.memory import memory_view

RUNGS = ("smollm2-q4_1", "smollm2-f16")

CAMPAIGN = """
[campaign]
name = "host-memory-ladder"
prompt_classes = ["short"]
reasoning = [false]
repetitions = 1
max_tokens = 4

[gates.not_on_card]
exclude = false

[server]
backend = "llama-server"
url = "{url}"
request_timeout_s = 300
log_file = "{log}"

[[models]]
name = "smollm2-q4_1"

[[models]]
name = "smollm2-f16"
pinned = true
"""


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    try:
        files = realmodel.ladder(dest=tmp_path_factory.mktemp("smollm2"))
    except realmodel.RealModelUnavailable as exc:
        pytest.fail(f"the real model is required for this test: {exc}")
    work = tmp_path_factory.mktemp("host-ladder")
    # the demo's context, SmolLM2's own: its KV cache (180 MiB) outweighs the Q4_1's weights (92 MiB)
    preset = llamacpp.write_preset(work / "models.ini", {n: files[n] for n in RUNGS}, ctx_size=8192)
    server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=work / "llama-server.log")
    server.start()
    try:
        store = open_store(work / "ladder.db")
        outcome = run_campaign(store, parse_campaign(CAMPAIGN.format(url=server.url, log=server.log_path),
                                                     "ladder.toml"), echo=lambda _: None)
    finally:
        server.stop()
    yield store, outcome.run_id, files
    store.close()


def test_the_f16_process_holds_more_than_the_q4_1_process(ladder_run, capsys):
    store, run_id, files = ladder_run
    view = memory_view(store.db, run_id)
    process = {r["model"]: r["process"] for r in view["loads"]}
    assert set(process) == set(RUNGS), view["loads"]
    with capsys.disabled():
        print("\nmeasured server process peak RSS (MiB): " + ", ".join(
            f"{m} {process[m]['peak_rss_mib']:.0f} (anonymous {process[m]['anon_mib']:.0f}, "
            f"file-backed {process[m]['file_mib']:.0f})" for m in RUNGS))
    q4, f16 = process["smollm2-q4_1"], process["smollm2-f16"]
    assert q4["peak_rss_mib"] < f16["peak_rss_mib"], process
    # the weights are memory-mapped: the difference is in the file-backed pages, at least half the files' own
    file_mib = {m: files[m].stat().st_size / 2**20 for m in RUNGS}
    grown = f16["file_mib"] - q4["file_mib"]
    assert grown > 0.5 * (file_mib["smollm2-f16"] - file_mib["smollm2-q4_1"]), (grown, file_mib)
    # each reading is the load's own router child, never the router or the other rung's child
    for row in view["loads"]:
        pid = store.db["loads"].get(row["load_id"])["pid"]
        assert row["process"]["pids"] == [pid] and row["process"]["n"] >= 2, row["process"]
        assert row["process_cells"] and row["process_cells"][0]["peak_rss_mib"] > 0


def test_the_article_says_the_kv_cache_makes_the_q4_1_save_less_than_its_file_suggests(ladder_run):
    """At 8,192 tokens the KV cache is the same for both rungs and larger than the Q4_1's weights: the measured
    saving is stated against the one the file sizes suggest, from this run's own readings and log lines."""
    from cardproof.report import queries
    from cardproof.report.findings import findings_for
    from cardproof.report.findings.inputs import gather
    from cardproof.report.findings.show import plain
    from cardproof.report.i18n import Lang

    store, run_id, files = ladder_run
    view = queries.run_view(store.db, run_id)
    found = [f for f in findings_for(view | gather(store.db, view)) if f.rule == "kvcache"]
    assert [f.key for f in found] == ["kvcache:smollm2-q4_1:smollm2-f16"], [f.key for f in found]
    saved, file_saved = found[0].params["saved"].value, found[0].params["file_saved"].value
    assert 0 < saved < file_saved - 0.10, (saved, file_saved)
    assert found[0].params["kv"].value > found[0].params["weights"].value
    assert "smollm2-q4_1 holds" in plain(found[0], Lang("en"))
