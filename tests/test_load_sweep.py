"""Concurrency steps (``[load]``) against the real llama-server started with ``--parallel 4``.

One model, no router: the server's four slots are what the steps are
measured against, and ``/props`` says so (``total_slots``).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import threading
import time
from pathlib import Path

import pytest

from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.store.stats import percentile, run_steps
from cardproof.daemon.run.runner import EXIT_PARTIAL, run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text

SLOTS = 4
CTX_TOKENS = 4096  # 1,024 per slot


def start_parallel(model: Path, workdir: Path) -> llamacpp.LlamaServerProcess:
    args = ["-m", str(model), "--parallel", str(SLOTS), "--ctx-size", str(CTX_TOKENS), "--threads", "2",
            "--metrics", "--no-webui"]
    return llamacpp.LlamaServerProcess(args, log_path=workdir / "llama-server.log").start()


@pytest.fixture(scope="module")
def parallel_server(tiny_models, tmp_path_factory):
    server = start_parallel(tiny_models["tiny-a"], tmp_path_factory.mktemp("parallel"))
    yield server
    server.stop()


def load_campaign_text(url: str, *, streams=(1, 2, 4, 8), per_stream=2, max_tokens=32, extra="") -> str:
    return (campaign_text(url, reps=1, max_tokens=8)
            + f"\n[load]\nstreams = {list(streams)}\nrequests_per_stream = {per_stream}\nmax_tokens = {max_tokens}\n"
            + extra)


@pytest.fixture(scope="module")
def sweep_db(parallel_server, tmp_path_factory):
    """One sweep of 1/2/4/8 streams, run once for the tests that read it."""
    db = tmp_path_factory.mktemp("sweep") / "sweep.db"
    store = open_store(db)
    out = run_campaign(store, parse_campaign(load_campaign_text(parallel_server.url, max_tokens=96)), echo=lambda s: None)
    store.close()
    assert out.status == "completed" and out.exit_code == 0, out
    return db, out.run_id


def test_every_request_of_the_sweep_is_a_sample_with_counters(sweep_db):
    db, run_id = sweep_db
    conn = sqlite3.connect(db)
    steps = conn.execute("select streams, requests, total_slots, queueing, cell_id, wall_s from load_steps "
                         "where run_id = ? and axis = 'load' order by position", [run_id]).fetchall()
    assert [s[0] for s in steps] == [1, 2, 4, 8]
    assert [s[2] for s in steps] == [SLOTS] * 4  # from /props total_slots
    assert [s[3] for s in steps] == [0, 0, 0, 1]  # more streams than slots: queueing
    for streams, requests, _, _, cell_id, wall_s in steps:
        assert requests == streams * 2 and wall_s > 0
        rows = conn.execute(
            "select s.error_kind, s.decode_tps, s.prompt_tokens, s.generated_tokens, s.ttft_ms, s.wall_ms, "
            "s.counter_source, s.nonce, ls.stream, ls.itl_ms_json, ls.chunks, s.request_json "
            "from samples s join load_samples ls on ls.sample_id = s.id where s.cell_id = ?", [cell_id]).fetchall()
        assert len(rows) == requests
        for r in rows:
            assert r[0] is None and r[6] == "timings"
            assert r[1] > 0 and r[2] > 0 and r[3] > 0 and 0 < r[4] <= r[5]
            assert 1 <= r[8] <= streams
            assert len(json.loads(r[9])) == r[10] - 1  # one interval between each pair of chunks
            assert json.loads(r[11])["cache_prompt"] is False
        assert len({r[7] for r in rows}) == requests  # a nonce of its own per request
        assert {r[8] for r in rows} == set(range(1, streams + 1))  # every stream sent
    # the runner counts them: coverage is whole
    planned, measured = conn.execute("select samples_planned, samples_measured from runs where id = ?",
                                     [run_id]).fetchone()
    assert planned == measured == 1 + 2 + 4 + 8 + 16


def mean_concurrency(conn, run_id: int, streams: int) -> tuple[float, float]:
    """Requests in flight and requests in service, each averaged over the step's wall time.

    In flight: sent and not yet ended (the end-to-end time). In service: the
    end-to-end time less the queue time (TTFT less the server's prefill). By
    time averages rather than instants, so a busy machine's late reads move
    an instant but hardly the mean; a server with four slots cannot serve
    more than four at a time on average.
    """
    rows = conn.execute(
        "select s.wall_ms, ls.queue_ms, st.wall_s from samples s join load_samples ls on ls.sample_id = s.id "
        "join load_steps st on st.id = ls.step_id where st.run_id = ? and st.streams = ?", [run_id, streams]).fetchall()
    step_ms = rows[0][2] * 1000.0
    return sum(w for w, _, _ in rows) / step_ms, sum(w - q for w, q, _ in rows) / step_ms


def test_queueing_step_shows_the_queue_in_ttft(sweep_db):
    """At 8 streams on 4 slots, some requests wait for a slot: TTFT minus the server's prefill is that wait."""
    db, run_id = sweep_db
    conn = sqlite3.connect(db)
    flight, service = mean_concurrency(conn, run_id, 8)
    # measured on 2 busy cores (load average 7-13), 96 tokens: 4 slots served 2.7-3.9 on average with 5.1-7.8 in
    # flight (once 5.4 at 48 tokens); a late read of the last chunk counts as service, hence the margin
    assert flight > SLOTS  # the eight streams did send at once ...
    assert service <= 1.5 * SLOTS  # ... and the server served four: the rest waited, and queue_ms is that wait
    queue = [q for (q,) in conn.execute(
        "select ls.queue_ms from load_samples ls join load_steps st on st.id = ls.step_id "
        "where st.streams = 8 and st.run_id = ?", [run_id])]
    ttft_minus_prefill = [t - p for t, p in conn.execute(
        "select s.ttft_ms, s.prompt_ms from samples s join load_steps st on st.cell_id = s.cell_id "
        "where st.streams = 8 and st.run_id = ? order by s.id", [run_id])]
    assert sorted(queue) == pytest.approx(sorted(ttft_minus_prefill))


def test_step_percentiles_equal_a_direct_computation(sweep_db):
    db, run_id = sweep_db
    conn = sqlite3.connect(db)

    def direct(values):
        cuts = statistics.quantiles(values, n=100, method="inclusive")  # linear between closest ranks
        return cuts[49], cuts[89], cuts[98]

    for f in run_steps(conn, run_id, "load"):
        cell = f.step["cell_id"]
        ttft = [r[0] for r in conn.execute("select ttft_ms from samples where cell_id = ?", [cell])]
        e2e = [r[0] for r in conn.execute("select wall_ms from samples where cell_id = ?", [cell])]
        decode = [r[0] for r in conn.execute("select decode_tps from samples where cell_id = ?", [cell])]
        itl = [x for (j,) in conn.execute("select itl_ms_json from load_samples where step_id = ?", [f.step["id"]])
               for x in json.loads(j)]
        generated = sum(r[0] for r in conn.execute("select generated_tokens from samples where cell_id = ?", [cell]))
        for spread, values in ((f.ttft_ms, ttft), (f.e2e_ms, e2e), (f.decode_tps, decode), (f.itl_ms, itl)):
            assert (spread.p50, spread.p90, spread.p99) == pytest.approx(direct(values))
            assert (spread.n, spread.min, spread.max) == (len(values), min(values), max(values))
        assert f.output_tps == pytest.approx(generated / f.step["wall_s"])
        assert f.requests_per_s == pytest.approx(len(ttft) / f.step["wall_s"])


def test_percentile_edges():
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([float("nan"), 1.0, 3.0], 50) == 2.0  # a NaN is no value


def test_server_killed_mid_step_gives_exception_samples_and_the_sweep_goes_on(tiny_models, tmp_path):
    server = start_parallel(tiny_models["tiny-a"], tmp_path)
    db = tmp_path / "killed.db"
    store = open_store(db)
    text = load_campaign_text(server.url, streams=(4, 2), per_stream=40, max_tokens=32)

    def killer():
        # a second connection reads the WAL file while the run writes: kill once the first step is under way
        conn = sqlite3.connect(db)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                n = conn.execute("select count(*) from samples where kind = 'load'").fetchone()[0]
            except sqlite3.Error:
                n = 0
            if n >= 6:
                server.kill()
                return
            time.sleep(0.01)

    t = threading.Thread(target=killer)
    t.start()
    try:
        out = run_campaign(store, parse_campaign(text), echo=lambda s: None)
    finally:
        t.join()
        server.stop()
    assert out.status == "completed" and out.exit_code == EXIT_PARTIAL
    conn = sqlite3.connect(db)
    steps = conn.execute("select streams, cell_id, requests from load_steps order by position").fetchall()
    assert [s[0] for s in steps] == [4, 2]  # the second step ran after the kill
    first = conn.execute("select count(*), count(error_kind) from samples where cell_id = ?", [steps[0][1]]).fetchone()
    second = conn.execute("select count(*), count(error_kind), min(error_kind) from samples where cell_id = ?",
                          [steps[1][1]]).fetchone()
    assert first[0] == steps[0][2] and 0 < first[1] < first[0]  # answered before the kill, exceptions after
    assert second[0] == second[1] == steps[1][2] and second[2] == "connection"
    assert out.measured + out.failed == out.planned  # every planned request is stored, none lost
    # a dead server labels nothing from a guess
    assert conn.execute("select total_slots, queueing from load_steps where streams = 2").fetchone() == (None, None)


@pytest.mark.parametrize("table, key", [
    ("[load]\nstreams = []", "load.streams"),
    ("[load]\nstreams = [1, 2, 2]", "load.streams[2]"),
    ("[load]\nstreams = [1000]", "load.streams[0]"),
    ("[load]\nstreams = [1.5]", "load.streams[0]"),
    ("[load]\nstreams = [1]\nprompt_class = \"huge\"", "load.prompt_class"),
    ("[load]\nstreams = [1]\nrequests_per_stream = 0", "load.requests_per_stream"),
    ("[load]\nstreams = [1]\nbogus = 1", "load.bogus"),
    ("[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = -5", "load.slo.ttft_p90_ms"),
    ("[load]\nstreams = [1]\n[load.slo]\nttft_p90_ms = nan", "load.slo.ttft_p90_ms"),
    ("[load]\nstreams = [1]\n[load.slo]", "load.slo"),
    ("load = 3", "load"),
    ("[depth]\ntokens = [-1]", "depth.tokens[0]"),
    ("[depth]\ntokens = \"4096\"", "depth.tokens"),
    ("[depth]\ntokens = [0]\nrepetitions = 0", "depth.repetitions"),
    ("[depth]\ntokens = [16777216]", "depth.tokens[0]"),  # no room left for the answer in any context
    ("[load]\nstreams = [256, 255, 254, 253, 252]\nrequests_per_stream = 1000", "load.requests_per_stream"),
    ("[load]\nstreams = [1]\nmax_tokens = 0", "load.max_tokens"),
])
def test_bad_load_and_depth_tables_name_the_key(table, key, tmp_path):
    text = table + "\n" + campaign_text("http://127.0.0.1:9")  # first: a bare key belongs to the top level
    with pytest.raises(CampaignError) as err:
        parse_campaign(text, "c.toml")
    assert f"c.toml: key '{key}'" in str(err.value) and "\n" not in str(err.value)


def test_sigterm_mid_step_ends_the_run_promptly_as_interrupted_with_what_it_stored(parallel_server, tmp_path):
    """64 streams in flight when SIGTERM comes: the run is marked interrupted within seconds, nothing stored is lost."""
    import os
    import signal
    import subprocess
    import sys

    camp = tmp_path / "c.toml"
    camp.write_text(load_campaign_text(parallel_server.url, streams=(64,), per_stream=50, max_tokens=64))
    db = tmp_path / "t.db"
    proc = subprocess.Popen([sys.executable, "-m", "cardproof.cli", "run", str(camp), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
    try:
        deadline = time.monotonic() + 120
        seen = 0
        while time.monotonic() < deadline and seen < 5:
            time.sleep(0.05)
            try:
                seen = sqlite3.connect(db).execute("select count(*) from samples where kind = 'load'").fetchone()[0]
            except sqlite3.Error:
                seen = 0
        assert seen >= 5, "the step never got going"
        sent_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - sent_at
    finally:
        proc.kill()
        proc.wait()
    assert took < 15, took
    conn = sqlite3.connect(db)
    status, measured = conn.execute("select status, samples_measured from runs").fetchone()
    stored = conn.execute("select count(*) from samples where kind = 'load' and error_kind is null").fetchone()[0]
    assert status == "interrupted" and stored >= seen and stored < 64 * 50
    assert measured >= 1 and measured <= stored + 1  # the cell's one sample and the answered load requests
