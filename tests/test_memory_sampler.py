"""The sampler: 10 Hz rows, a clean stop, and the no-driver path on this machine for real."""

from __future__ import annotations

import threading
import time

import pytest

from cardproof.daemon.memory import NOT_MEASURED, MemorySampler, NvmlSource, RecordedSource, SourceUnavailable
from cardproof.daemon.memory.capture import MemoryCapture
from memory_support import FIXTURES, StandIn, add_load, make_run


@pytest.fixture
def procs(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    ps = {"SERVER": StandIn(dev / "nvidia0"), "NEIGHBOUR": StandIn(dev / "nvidia1"), "DESKTOP": StandIn(dev / "n2")}
    yield dev, {k: v.pid for k, v in ps.items()}
    for p in ps.values():
        p.stop()


def test_recorded_reading_sampler_at_10_hz_writes_rows_and_stops_cleanly(tmp_path, procs):
    dev, pids = procs
    store, run_id, model_id = make_run(tmp_path / "m.db")
    load_id = add_load(store, run_id, model_id)
    src = RecordedSource(FIXTURES / "seed_two_3090.json", pids=pids, device_prefixes=[str(dev)])
    sampler = MemorySampler(store, src, run_id=run_id, interval_s=0.1).start()
    sampler.attach(load_id, [pids["SERVER"]])
    time.sleep(1.05)
    sampler.stop()
    assert not sampler.running and sampler.errors == []
    ticks = store.db.execute(
        "select count(distinct ts) from memory_samples where run_id = ? and scope = 'device'", [run_id]
    ).fetchone()[0]
    assert 8 <= ticks <= 13, ticks  # 10 Hz for about one second
    assert ticks == sampler.ticks
    after_stop = store.db.execute("select count(*) from memory_samples").fetchone()[0]
    time.sleep(0.3)
    assert store.db.execute("select count(*) from memory_samples").fetchone()[0] == after_stop
    assert store.db.execute(
        "select count(*) from memory_samples where source = 'recorded' and scope = 'device'"
    ).fetchone()[0] == 2 * ticks
    # the server's rows carry the load, the neighbour's do not
    tagged = {r[0]: r[1] for r in store.db.execute(
        "select pid, max(load_id) from memory_samples where scope = 'process' group by pid")}
    assert tagged[pids["SERVER"]] == load_id
    assert tagged[pids["NEIGHBOUR"]] is None
    assert not any(t.name == "cardproof-nvml-sampler" for t in threading.enumerate())


def test_no_driver_on_this_machine_writes_one_row_and_no_fallback(tmp_path):
    """The real NvmlSource on a machine without a driver (this one)."""
    src = NvmlSource()
    try:
        src.open()
        src.close()
        pytest.skip("an NVIDIA driver is present here")
    except SourceUnavailable:
        pass
    store, run_id, model_id = make_run(tmp_path / "m.db")
    # a self-report exists: it must not show up as a card figure
    store.insert("memory_selfreports", {"run_id": run_id, "load_id": None, "source": "ollama /api/ps",
                                        "kind": "ps", "gpu_mib": 25108.48, "total_mib": 25108.48})
    sampler = MemorySampler(store, src, run_id=run_id, interval_s=0.1).start()
    time.sleep(0.35)
    sampler.stop()
    assert sampler.available is False and not sampler.running
    rows = list(store.db.query("select * from memory_samples where run_id = ?", [run_id]))
    assert len(rows) == 1
    assert rows[0]["note"] == NOT_MEASURED == "card memory: not measured (no NVIDIA driver)"
    assert rows[0]["used_mib"] is None and rows[0]["total_mib"] is None and rows[0]["free_mib"] is None
    assert rows[0]["source"] == "nvml" and "NVML" in rows[0]["reason"]


def test_no_driver_capture_calls_all_return_and_say_not_measured(tmp_path):
    store, run_id, model_id = make_run(tmp_path / "m.db")
    cap = MemoryCapture(store, run_id, source=RecordedSource(FIXTURES / "no_driver.json")).start()
    assert not cap.available and NOT_MEASURED in cap.status_line()
    check = cap.before_load(model_id, required_mib=32030)
    assert check["available"] is False and check["enough"] is None and check["free_mib"] is None
    load_id = add_load(store, run_id, model_id, pid=12345)
    stats = cap.after_load(load_id, pid=12345)
    assert stats["status"] == "not_measured" and stats["total_mib"] is None
    cell = cap.end_cell(store.insert("cells", {"run_id": run_id, "model_id": model_id}), load_id)
    assert cell["status"] == "not_measured" and cell["peak_mib"] is None
    cap.stop()
    assert store.db.execute("select count(*) from memory_samples").fetchone()[0] == 1
    assert NOT_MEASURED in store.db.execute("select note from memory_free_checks").fetchone()[0]


def test_sampler_records_a_failing_tick_and_keeps_going(tmp_path):
    store, run_id, _ = make_run(tmp_path / "m.db")

    class Flaky:
        kind = "recorded"

        def __init__(self):
            self.calls = 0
            self.inner = RecordedSource(FIXTURES / "seed_two_3090.json", pids={"SERVER": 1, "NEIGHBOUR": 1, "DESKTOP": 1})

        def open(self):
            self.inner.open()

        def read(self):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("driver hiccup")
            return self.inner.read()

    sampler = MemorySampler(store, Flaky(), run_id=run_id, interval_s=0.05).start()
    time.sleep(0.4)
    sampler.stop()
    assert sampler.errors and "driver hiccup" in sampler.errors[0]
    assert sampler.ticks >= 3


def test_interval_must_be_positive(tmp_path):
    store, run_id, _ = make_run(tmp_path / "m.db")
    with pytest.raises(ValueError):
        MemorySampler(store, NvmlSource(), run_id=run_id, interval_s=0)
