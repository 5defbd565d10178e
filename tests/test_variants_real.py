"""Variants of the real model (SmolLM2-135M-Instruct, the shipped Q4_1) through a router-mode llama-server and
through a single llama-server: each variant's arguments proven by its own load's log, against the model's
own load, whose log states the settings the variant changed (2 threads, an f16 KV cache).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from cardproof.daemon.server import llamacpp, realmodel
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store

CAMPAIGN = """
[campaign]
name = "real-variants"
prompt_classes = ["short"]
reasoning = [false]
repetitions = 2
max_tokens = 16

[gates.length_limit]
exclude = false
[gates.not_on_card]
exclude = false

[server]
backend = "llama-server"
url = "{url}"
request_timeout_s = 300
log_file = "{log}"

[[models]]
name = "smollm2-q4_1"
file = "{file}"

[variants.sets]
t1 = ["--threads", "1"]
kv8 = ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]

[rules]
variants_took = 'n_threads == 2 and variant.t1.n_threads == 1 and variant.kv8.kv_cache_type_v == "q8_0"'
"""


@pytest.fixture(scope="module")
def q4_1(tmp_path_factory):
    try:
        return realmodel.fetch(dest=tmp_path_factory.mktemp("smollm2"))
    except realmodel.RealModelUnavailable as exc:
        pytest.fail(f"the real model is required for these tests: {exc}")


def _run(server, file, folder):
    store = open_store(folder / "real.db")
    out = run_campaign(store, parse_campaign(CAMPAIGN.format(url=server.url, log=server.log_path, file=file)),
                       echo=lambda _: None)
    store.close()
    return folder / "real.db", out


@pytest.fixture(scope="module")
def router_run(q4_1, tmp_path_factory):
    folder = tmp_path_factory.mktemp("real-router")
    preset = llamacpp.write_preset(folder / "models.ini", {"smollm2-q4_1": q4_1}, ctx_size=4096)
    server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=folder / "router.log").start()
    try:
        yield _run(server, q4_1, folder)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def single_run(q4_1, tmp_path_factory):
    folder = tmp_path_factory.mktemp("real-single")
    server = llamacpp.LlamaServerProcess(
        ["-m", str(q4_1), "-c", "4096", "--parallel", "1", "-t", "2", "-lv", "4", "--log-colors", "off"],
        log_path=folder / "single.log").start()
    try:
        yield _run(server, q4_1, folder)
    finally:
        server.stop()


def _facts(conn, load_id: int) -> dict:
    return {n: (v if v is not None else t) for n, v, t in conn.execute(
        "select name, value_num, value_text from facts where load_id = ? and name in "
        "('n_threads', 'kv_cache_type_k', 'kv_cache_type_v') order by id", [load_id])}


@pytest.mark.parametrize("which", ["router_run", "single_run"])
def test_real_model_variants_proven_by_their_own_log(which, request):
    db, out = request.getfixturevalue(which)
    assert out.status == "completed" and out.measured == out.planned == 2 + 2 * 2
    conn = sqlite3.connect(db)
    rows = {name: (status, load_id, json.loads(checks)) for name, status, load_id, checks in conn.execute(
        "select name, status, load_id, checks_json from variants order by position")}
    assert {n: r[0] for n, r in rows.items()} == {"t1": "took", "kv8": "took"}
    for name, (_, load_id, checks) in rows.items():
        for c in checks:  # each verdict rests on a line of the variant's own load, read from the log
            assert conn.execute("select load_id from log_lines where id = ?", [c["line_id"]]).fetchone()[0] == load_id
    assert _facts(conn, rows["t1"][1])["n_threads"] == 1
    assert _facts(conn, rows["kv8"][1])["kv_cache_type_k"] == "q8_0"
    assert _facts(conn, rows["kv8"][1])["n_threads"] == 2  # the base's threads, kept
    outcome = conn.execute("select outcome from rule_results where run_id = ?", [out.run_id]).fetchone()[0]
    if which == "router_run":  # the model's own load: its log (the campaign's) says 2 threads and f16
        base = conn.execute("select l.id from loads l join models m on m.id = l.model_id where m.name = "
                            "'smollm2-q4_1' and l.origin is null and l.status = 'loaded'").fetchone()[0]
        assert _facts(conn, base) == {"n_threads": 2.0, "kv_cache_type_k": "f16", "kv_cache_type_v": "f16"}
        assert outcome == "pass"
    else:  # a single server loaded its model before the run: its own facts are not in this run's loads
        assert outcome == "undecided"
    answered = conn.execute(
        "select m.name, count(*) from samples s join cells c on c.id = s.cell_id join models m on m.id = c.model_id "
        "where s.error_kind is null and s.generated_tokens > 0 group by m.name").fetchall()
    assert dict(answered) == {"smollm2-q4_1": 2, "smollm2-q4_1~t1": 2, "smollm2-q4_1~kv8": 2}
