"""The runner's per-request path made cheaper without dropping anything stored (issue 17, speed).

``bench/runner_overhead.py`` measures the cost; these tests hold what it
must not change: the shape of every stored sample and gate row of a real
run (columns filled, JSON keys, the request sent) equals the shape recorded
before the per-request path was changed (``tests/fixtures/runner_store_shape.json``),
and the bench's own statistics and phase clock say what they claim.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest

from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.runner import run_campaign
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
