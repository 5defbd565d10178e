"""Retention on synthetic rows in a real SQLite store, and the Prometheus endpoint."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import httpx
import pytest

from cardproof.daemon.service.config import MetricsConfig, RetentionConfig
from cardproof.daemon.service.metrics import MetricsEndpoint, render
from cardproof.daemon.service.progress import Progress
from cardproof.daemon.service.retention import apply_retention
from cardproof.daemon.store import open_store

NOW = datetime(2026, 6, 10, 12, 0, tzinfo=timezone.utc)


def _iso(dt):
    return dt.isoformat(timespec="microseconds")


def _tick(ts, used, run_id=None, pid=4242):
    return [
        {"ts": _iso(ts), "scope": "device", "device_index": 0, "used_mib": used, "total_mib": 24576.0,
         "free_mib": 24576.0 - used, "source": "nvml", "run_id": run_id},
        {"ts": _iso(ts), "scope": "process", "device_index": 0, "pid": pid, "used_mib": used - 300,
         "source": "nvml", "run_id": run_id},
    ]


def test_memory_is_thinned_to_the_peak_tick_per_bucket(tmp_path):
    store = open_store(tmp_path / "m.db")
    old = NOW - timedelta(days=2)
    rows = []
    for s in range(600):  # ten idle minutes at 1 Hz, two days ago
        rows += _tick(old + timedelta(seconds=s), 1000.0 + (5000.0 if s == 125 else s % 7))
    for s in range(120):  # a run two days ago: kept whole
        rows += _tick(old + timedelta(minutes=20, seconds=s), 9000.0, run_id=1)
    for s in range(30):  # recent: untouched
        rows += _tick(NOW - timedelta(minutes=5, seconds=s), 2000.0)
    store.db["memory_samples"].insert_all(rows)
    r = apply_retention(store, RetentionConfig(memory_downsample_after_h=24, memory_bucket_s=60), now=NOW)
    assert r.memory_ticks_kept == 10 and r.memory_rows_deleted == (600 - 10) * 2
    q = store.db.execute
    assert q("select count(*) from memory_samples where run_id = 1").fetchone()[0] == 240
    assert q("select count(*) from memory_samples where ts > ?", [_iso(NOW - timedelta(hours=1))]).fetchone()[0] == 60
    # the spike survives, with its process row: a kept tick still adds up
    spike = _iso(old + timedelta(seconds=125))
    assert sorted(r[0] for r in q("select scope from memory_samples where ts = ?", [spike])) == ["device", "process"]
    # idempotent: a second pass finds nothing more to thin
    again = apply_retention(store, RetentionConfig(memory_downsample_after_h=24, memory_bucket_s=60), now=NOW)
    assert again.memory_rows_deleted == 0


def test_log_lines_referenced_by_facts_are_kept_forever(tmp_path):
    store = open_store(tmp_path / "l.db")
    db = store.db
    old, recent = _iso(NOW - timedelta(days=90)), _iso(NOW - timedelta(days=1))
    db["log_sources"].insert({"id": 1, "kind": "plain", "name": "/var/log/llama-server.log"})
    db["runs"].insert({"id": 3, "status": "completed"})
    ids = {}
    for name, ts, extra in (
        ("fact", old, {}), ("request", old, {}), ("selfreport", old, {}), ("run", old, {"run_id": 3}),
        ("plain", old, {}), ("plain2", old, {}), ("recent", recent, {}), ("no_ts", None, {}),
    ):
        ids[name] = db["log_lines"].insert({"source_id": 1, "ts": ts, "raw": name, **extra}).last_pk
    db["facts"].insert({"line_id": ids["fact"], "name": "kv_buffer_mib", "value_num": 384.0})
    db["requests_seen"].insert({"line_id": ids["request"], "client": "192.168.1.5", "ts": old})
    db["memory_selfreports"].insert({"ts": old, "line_ids_json": f"[{ids['selfreport']}]"})
    db.conn.commit()
    r = apply_retention(store, RetentionConfig(log_lines_keep_days=30), now=NOW)
    left = {row["raw"] for row in db.query("select raw from log_lines")}
    assert left == {"fact", "request", "selfreport", "run", "recent", "no_ts"}
    assert (r.log_lines_deleted, r.log_lines_without_ts) == (2, 1)
    # with keep_run_rows off, a run's old unreferenced line goes too; the fact's line never does
    apply_retention(store, RetentionConfig(log_lines_keep_days=30, keep_run_rows=False), now=NOW)
    assert "run" not in {row["raw"] for row in db.query("select raw from log_lines")}
    assert db["log_lines"].get(ids["fact"])["raw"] == "fact"


def test_prometheus_endpoint_on_loopback(tmp_path):
    store = open_store(tmp_path / "p.db")
    db = store.db
    db["daemon_queue"].insert_all([{"status": "queued"}, {"status": "queued"}, {"status": "done"}])
    db["runs"].insert({"id": 5, "status": "completed"})
    db["samples"].insert_all([{"id": 1, "run_id": 5, "kind": "measure"}, {"id": 2, "run_id": 5, "kind": "measure"}])
    db["gate_results"].insert_all([
        {"sample_id": 1, "gate": "length_limit", "fired": 1}, {"sample_id": 2, "gate": "length_limit", "fired": 0},
    ])
    db["memory_samples"].insert_all(_tick(NOW, 1500.0, pid=77))
    db.conn.commit()
    progress = Progress()
    progress.begin(9, "nightly")
    progress.echo("run 6: campaign nightly (abc), 1 cells, 4 samples planned")
    progress.echo("[1/4] tiny-a short reasoning=off rep 1/4: decode 812.5 tok/s, prefill 9000.0 tok/s")
    ep = MetricsEndpoint(MetricsConfig(enabled=True, bind="127.0.0.1", port=0))
    ep.start(SimpleNamespace(db_path=store.path, progress=progress))
    try:
        assert ep.url.startswith("http://127.0.0.1:")
        r = httpx.get(ep.url, timeout=5)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = r.text
        assert httpx.get(ep.url.replace("/metrics", "/other"), timeout=5).status_code == 404
    finally:
        ep.stop()
    # read as Prometheus reads it (the exposition is prometheus_client's: 1.0, 1.572864e+09)
    samples = _samples(text)
    for name, labels, value in (
        ("cardproof_run_samples_done", {"run_id": "6", "campaign": "nightly"}, 1),
        ("cardproof_run_coverage_ratio", {"run_id": "6", "campaign": "nightly"}, 0.25),
        ("cardproof_run_last_decode_tokens_per_second", {"run_id": "6", "campaign": "nightly"}, 812.5),
        ("cardproof_queue_entries", {"status": "queued"}, 2),
        ("cardproof_gate_firings", {"gate": "length_limit", "run_id": "5"}, 1),
        ("cardproof_gate_judged", {"gate": "length_limit", "run_id": "5"}, 2),
        ("cardproof_gpu_memory_used_bytes", {"device": "0"}, 1500 * 1024 * 1024),
        ("cardproof_gpu_process_memory_used_bytes", {"device": "0", "pid": "77"}, 1200 * 1024 * 1024),
        ("cardproof_daemon_phase", {"phase": "running"}, 1),
    ):
        assert samples.get((name, frozenset(labels.items()))) == value, (name, labels)
    assert "# TYPE cardproof_run_samples_done gauge" in text.splitlines()
    assert ep.status()["state"] == "stopped"


def test_render_on_an_empty_store(tmp_path):
    store = open_store(tmp_path / "e.db")
    assert _samples(render(store.path)) == {("cardproof_daemon_up", frozenset()): 1.0}


def _samples(text: str) -> dict:
    """(name, labels) -> value, parsed by prometheus_client: what a scraper would store."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.parametrize("bind", ["0.0.0.0", "192.168.1.5", "localhost"])
def test_metrics_bind_must_be_loopback(bind):
    from cardproof.daemon.service.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="metrics.bind"):
        parse_config(f'[metrics]\nbind = "{bind}"\n', "d.toml", default_db=tmp_db(), default_data_dir=tmp_db())


def tmp_db():
    from pathlib import Path

    return Path("/nonexistent")
