"""The runner's per-request path made cheaper without dropping anything stored.

``bench/runner_overhead.py`` measures the cost; these tests hold what it
must not change: the shape of every stored sample and gate row of a real
run (columns filled, JSON keys, the request sent) equals the shape recorded
before the per-request path was changed (``tests/fixtures/runner_store_shape.json``),
and the bench's own statistics and phase clock say what they claim.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store

from conftest import campaign_text

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from store_shape import store_shape  # noqa: E402

GOLDEN = Path(__file__).parent / "fixtures" / "runner_store_shape.json"


def _run_shape(url: str, tmp_path: Path) -> dict:
    store = open_store(tmp_path / "shape.db")
    text = campaign_text(url, models=("tiny-a", "tiny-b"), reps=3, max_tokens=8)
    out = run_campaign(store, parse_campaign(text, "shape.toml"), echo=lambda s: None)
    assert out.measured == out.planned == 6
    # A random-weight model may end an answer with its end token before any text (seen: two tokens,
    # no text): no chunk carried text, so there is no time to a first one, and NULL is the honest value.
    # Such a row is checked for that here and then shaped like the others.
    silent = store.db.execute("select id, ttft_ms from samples where answer_chars = 0 and reasoning_chars = 0 "
                              "and error_kind is null").fetchall()
    assert all(ttft is None for _, ttft in silent), silent
    store.db.execute("update samples set ttft_ms = 0.0 where answer_chars = 0 and reasoning_chars = 0 "
                     "and error_kind is null")
    store.db.conn.commit()
    return store_shape(store.db.conn)


def test_stored_rows_keep_their_shape(llama_server, tmp_path):
    """A real run's sample and gate rows: the same columns filled, JSON keys and requests as before the change."""
    shape = _run_shape(llama_server.url, tmp_path)
    (tmp_path / "shape.json").write_text(json.dumps(shape, indent=1, sort_keys=True))
    assert shape == json.loads(GOLDEN.read_text()), f"compare {tmp_path / 'shape.json'} with {GOLDEN}"


def test_store_shape_sees_a_dropped_value(tmp_path):
    """The comparison can fail: a JSON key or a column left empty changes the shape."""
    store = open_store(tmp_path / "s.db")
    run = store.insert("runs", {"status": "running"})
    row = {"run_id": run, "repetition": 1, "kind": "measure", "decode_tps": 12.5, "counter_source": "timings",
           "request_json": '{"max_tokens":8}', "response_json": '{"timings":{"predicted_n":8},"answer":"x"}'}
    store.insert("samples", row)
    before = store_shape(store.db.conn)
    store.db.execute("update samples set response_json = ?", ['{"answer":"x"}'])
    dropped_key = store_shape(store.db.conn)
    store.db.execute("update samples set response_json = ?, decode_tps = null", [row["response_json"]])
    dropped_column = store_shape(store.db.conn)
    store.db.execute("update samples set decode_tps = 99.0")
    assert dropped_key != before and dropped_column != before
    assert store_shape(store.db.conn) == before  # another value of the same kind is the same shape


def test_bootstrap_interval_holds_one_for_a_and_a_and_not_for_a_shift():
    from runner_overhead import bootstrap_ratio

    rng = random.Random(3)
    a = [rng.gauss(20.0, 1.0) for _ in range(60)]
    b = [rng.gauss(20.0, 1.0) for _ in range(60)]
    lo, hi = bootstrap_ratio(a, b)
    assert lo < 1.0 < hi
    lo, hi = bootstrap_ratio([x * 1.10 for x in a], b)
    assert lo > 1.05


def test_phase_clock_counts_a_phase_inside_another_only_once():
    from request_phases import PhaseClock

    clock = PhaseClock()
    inner = clock.wrap(lambda: time.sleep(0.05), "inner")
    outer = clock.wrap(lambda: (time.sleep(0.02), inner()), "outer")
    outer()
    assert clock.seconds["inner"] >= 0.05
    assert 0.02 <= clock.seconds["outer"] < 0.05  # its own 20 ms, not the inner 50
    assert clock.calls == {"inner": 1, "outer": 1}


def _sample_row(run_id: int) -> dict:
    return {"run_id": run_id, "repetition": 2, "nonce": "n-1", "started_at": "2026-11-30T20:00:00+00:00",
            "kind": "measure", "load_id": None, "prompt_tokens": 101, "generated_tokens": 32, "prompt_ms": 5.25,
            "predicted_ms": 11.5, "prefill_tps": 19238.1, "decode_tps": 2782.6, "ttft_ms": 6.0, "wall_ms": 19.0,
            "stop_reason": "length", "answer_chars": 140, "reasoning_chars": 0, "draft_tokens": None,
            "draft_accepted": None, "cached_tokens": 0, "counter_source": "timings",
            "request_json": '{"max_tokens":32}', "response_json": '{"answer":"\u2028x"}'}


def test_sample_insert_stores_the_row_store_insert_stores(tmp_path):
    """The prepared INSERT of a sample writes exactly what ``Store.insert`` (sqlite-utils) writes."""
    from cardproof.daemon.run.sampling import insert_sample

    store = open_store(tmp_path / "s.db")
    run = store.insert("runs", {"status": "running"})
    a = store.insert("samples", _sample_row(run))
    b = insert_sample(store, _sample_row(run))
    odd = _sample_row(run) | {"error_text": {"not": "plain"}, "answer_chars": True}  # sqlite-utils' own conversions
    c = store.insert("samples", odd)
    d = insert_sample(store, dict(odd))
    rows = {r[0]: r[1:] for r in store.db.execute("select * from samples")}
    assert b == a + 1 and rows[a] == rows[b]
    assert rows[c] == rows[d] and rows[c] != rows[a]
    assert store.db.conn.in_transaction is False  # committed at once


def test_sample_insert_failure_names_the_file_and_keeps_earlier_rows(tmp_path):
    from cardproof.daemon.run.sampling import insert_sample
    from cardproof.daemon.store import StoreError

    store = open_store(tmp_path / "s.db")
    run = store.insert("runs", {"status": "running"})
    first = insert_sample(store, _sample_row(run))
    with pytest.raises(StoreError, match=r"s\.db.*cannot write to table samples"):
        insert_sample(store, _sample_row(run) | {"no_such_column": 1})
    again = open_store(tmp_path / "s.db", mode="ro")
    assert [r[0] for r in again.db.execute("select id from samples")] == [first]


def test_bench_runner_block_gives_one_positive_interval_per_request(llama_server, tmp_path):
    """The bench's runner intervals: one per request, each from the line before it (not from the run's last line)."""
    from runner_overhead import runner_block

    walls, cpus = runner_block(llama_server.url, open_store(tmp_path / "b.db"), 3)
    assert len(walls) == len(cpus) == 3
    assert all(w > 0 for w in walls) and all(c >= 0 for c in cpus)


def test_core_split_gives_the_server_its_own_cpus_and_the_clients_the_rest(monkeypatch):
    """``bench/cores.py``: a server started inside ``server_start`` runs on its CPUs, the bench afterwards on the others."""
    import os
    import subprocess

    import cores

    allowed = os.sched_getaffinity(0)
    try:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
        split4 = cores.split()
        assert split4.clients == {0} and split4.server == {1, 2, 3} and split4.threads == 3
        assert cores.split(shared=True).server == cores.split(shared=True).clients == {0, 1, 2, 3}
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5})
        one = cores.split()
        assert one.server == one.clients == {5} and "share" in one.describe()
    finally:
        monkeypatch.undo()
    if len(allowed) < 2:
        pytest.skip("one CPU here: nothing to pin")
    split = cores.split()
    try:
        with cores.server_start(split):
            child = subprocess.Popen(["sleep", "5"])
        assert os.sched_getaffinity(child.pid) == split.server
        assert os.sched_getaffinity(0) == split.clients
        assert split.server.isdisjoint(split.clients)
        grandchild = subprocess.Popen(["sleep", "5"])  # a client tool started now (GuideLLM) shares the clients' CPUs
        assert os.sched_getaffinity(grandchild.pid) == split.clients
        grandchild.kill()
        child.kill()
    finally:
        os.sched_setaffinity(0, allowed)


def test_fixed_length_makes_every_answer_max_tokens_long_and_says_so(llama_server, tmp_path):
    """``bench/fixed_length.py`` against the real server: without it the tiny model's answers stop at its
    end-of-sequence token at lengths that differ by request; with it every one is max_tokens long, the stored
    request shows ``ignore_eos``, and the runner is as it was once the block ends."""
    from fixed_length import fixed_length

    def lengths(name: str, reps: int) -> tuple[list[int], list[dict]]:
        store = open_store(tmp_path / f"{name}.db")
        # tiny-b (bench/runner_overhead.py's model) ends about half of its answers before 48 tokens: in 30
        # answers of up to 48 tokens, all of them reaching the limit by chance is below one in 10^5
        text = campaign_text(llama_server.url, models=("tiny-b",), reps=reps, max_tokens=48)
        run_campaign(store, parse_campaign(text, f"{name}.toml"), echo=lambda s: None)
        rows = store.db.execute("select generated_tokens, request_json from samples where kind = 'measure' "
                                "and error_kind is null").fetchall()
        return [r[0] for r in rows], [json.loads(r[1]) for r in rows]

    natural, asked = lengths("natural", 30)
    assert any(n < 48 for n in natural) and not any(r.get("ignore_eos") for r in asked)
    with fixed_length():
        fixed, asked = lengths("fixed", 8)
    assert len(fixed) == 8 and set(fixed) == {48}
    assert all(r["ignore_eos"] is True for r in asked)
    after, asked = lengths("after", 2)
    assert not any(r.get("ignore_eos") for r in asked)


def test_server_time_taken_out_sees_a_client_cost_under_a_drifting_server():
    """The wall time minus the server's own time: a 2 ms client cost shows through a server whose speed drifts by
    a third between blocks (which buries it in the wall-time ratio), and an A/A pair stays at one."""
    from runner_overhead import bootstrap_excess, server_seconds

    rng = random.Random(5)
    order = [(arm, 8) for _ in range(6) for arm in ("runner", "bare", "bare2")]
    logged, walls = [{"prompt": (1.0, 1, 1.0), "eval": (1.0, 1, 1.0)}] * 3, {"runner": [], "bare": [], "bare2": []}
    for arm, n in order:
        speed = rng.choice([1.0, 1.35])  # the machine, block by block
        for _ in range(n):
            prompt_ms, eval_ms = 12.0 * speed, 26.0 * speed * rng.uniform(0.97, 1.03)
            logged.append({"prompt": (prompt_ms, 100, 0.0), "eval": (eval_ms, 32, 0.0)})
            walls[arm].append((prompt_ms + eval_ms + 7.0 + (2.0 if arm == "runner" else 0.0)
                               + rng.uniform(-0.2, 0.2)) / 1000.0)
    served = server_seconds(logged, order, 3)
    assert [len(served[a]) for a in ("runner", "bare", "bare2")] == [48, 48, 48]
    own = {a: [w - s for w, s in zip(walls[a], served[a])] for a in walls}
    base = statistics.median(walls["bare"] + walls["bare2"])
    lo, hi = bootstrap_excess(own["runner"], own["bare"] + own["bare2"], base)
    assert lo > 1.02 and hi < 1.1  # 2 ms on about 45 ms
    lo, hi = bootstrap_excess(own["bare2"], own["bare"], statistics.median(walls["bare"]))
    assert lo < 1.0 < hi or abs(lo - 1) < 0.005
