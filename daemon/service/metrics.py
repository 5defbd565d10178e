"""An optional Prometheus text endpoint on loopback, for an existing monitoring stack.

``GET /metrics`` answers the current run's progress (from the daemon's own
progress, not reconstructed), the queue, gate firings of the latest judged
run, and the newest memory reading per device and process. It has no
authentication, so the config accepts loopback addresses only.
"""

from __future__ import annotations

import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from .config import MetricsConfig
from cardproof.daemon.store.file import connect_readonly

MIB = 1024 * 1024


class _Families:
    """Samples gathered per metric name, in the order first seen (one HELP and TYPE each)."""

    def __init__(self):
        self.by_name: dict[str, Metric] = {}

    def metric(self, name: str, kind: str, help_text: str, value, **labels) -> None:
        if value is None:
            return
        family = self.by_name.setdefault(name, Metric(name, help_text, kind))
        # an unknown label (a process without a name) is left out, not exposed as ""
        family.add_sample(name, {k: str(v) for k, v in labels.items() if v is not None}, float(value))


class StoreCollector:
    """A prometheus_client collector that reads the store and the progress at each scrape."""

    def __init__(self, db_path: Path, snapshot=lambda: None):
        self.db_path = db_path
        self.snapshot = snapshot

    def collect(self):
        yield from _families(self.db_path, self.snapshot()).by_name.values()


def render(db_path: Path, snapshot=None) -> str:
    """The exposition text: progress from ``snapshot``, the rest from the database."""
    registry = CollectorRegistry(auto_describe=False)  # no collect() at registration: scrapes read the store
    registry.register(StoreCollector(db_path, lambda: snapshot))
    return generate_latest(registry).decode("utf-8")


def _families(db_path: Path, snapshot) -> _Families:
    out = _Families()
    out.metric("cardproof_daemon_up", "gauge", "1 while the daemon serves this endpoint", 1)
    if snapshot is not None:
        phase = snapshot.phase
        for p in ("idle", "waiting_quiet", "running", "stopping"):
            out.metric("cardproof_daemon_phase", "gauge", "1 for the daemon's current phase", int(p == phase),
                       phase=p)
        if snapshot.run_id is not None:
            lab = {"run_id": snapshot.run_id, "campaign": snapshot.campaign}
            out.metric("cardproof_run_samples_planned", "gauge", "samples planned in the current run",
                       snapshot.planned, **lab)
            out.metric("cardproof_run_samples_done", "gauge", "samples attempted in the current run",
                       snapshot.done, **lab)
            out.metric("cardproof_run_samples_measured", "gauge", "samples with counters in the current run",
                       snapshot.measured, **lab)
            out.metric("cardproof_run_samples_failed", "gauge", "samples that ended in an exception",
                       snapshot.failed, **lab)
            out.metric("cardproof_run_coverage_ratio", "gauge", "measured / planned of the current run",
                       snapshot.coverage, **lab)
            out.metric("cardproof_run_last_decode_tokens_per_second", "gauge",
                       "decode tok/s of the last sample (server counters)", snapshot.last_decode_tps, **lab)
    conn = connect_readonly(db_path, timeout=2.0)
    try:
        for status, n in conn.execute("select status, count(*) from daemon_queue group by status"):
            out.metric("cardproof_queue_entries", "gauge", "queue entries per status", n, status=status)
        row = conn.execute(
            "select max(s.run_id) from gate_results g join samples s on s.id = g.sample_id"
        ).fetchone()
        if row and row[0] is not None:
            for gate, fired, judged in conn.execute(
                "select g.gate, sum(g.fired = 1), count(*) from gate_results g join samples s on s.id = g.sample_id "
                "where s.run_id = ? and coalesce(s.kind, 'measure') = 'measure' group by g.gate", [row[0]]
            ):
                out.metric("cardproof_gate_firings", "gauge", "measurement samples a gate fired on (latest judged run)",
                           fired or 0, gate=gate, run_id=row[0])
                out.metric("cardproof_gate_judged", "gauge", "measurement samples a gate judged (latest judged run)",
                           judged, gate=gate, run_id=row[0])
        last = conn.execute("select max(ts) from memory_samples where used_mib is not null").fetchone()[0]
        if last:
            for scope, dev, pid, pname, used, total, free in conn.execute(
                "select scope, device_index, pid, process_name, used_mib, total_mib, free_mib from memory_samples "
                "where ts = ?", [last]
            ):
                if scope == "device":
                    out.metric("cardproof_gpu_memory_used_bytes", "gauge", "device memory used (NVML)",
                               used * MIB if used is not None else None, device=dev)
                    out.metric("cardproof_gpu_memory_total_bytes", "gauge", "device memory total (NVML)",
                               total * MIB if total is not None else None, device=dev)
                    out.metric("cardproof_gpu_memory_free_bytes", "gauge", "device memory free (NVML)",
                               free * MIB if free is not None else None, device=dev)
                else:
                    out.metric("cardproof_gpu_process_memory_used_bytes", "gauge", "memory per process (NVML)",
                               used * MIB if used is not None else None, device=dev, pid=pid, process=pname)
    finally:
        conn.close()
    return out


class MetricsEndpoint:
    """The HTTP server as a collector: started with the others, stopped with them."""

    name = "metrics"

    def __init__(self, cfg: MetricsConfig):
        self.cfg = cfg
        self.server: ThreadingHTTPServer | None = None
        self.error: str | None = None
        self.scrapes = 0

    @property
    def url(self) -> str | None:
        if not self.server:
            return None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/metrics"

    def start(self, ctx) -> None:
        endpoint = self
        registry = CollectorRegistry(auto_describe=False)
        registry.register(StoreCollector(ctx.db_path, ctx.progress.snapshot))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                try:
                    body = generate_latest(registry)
                    code = 200
                except sqlite3.Error as exc:
                    body, code = f"# database unreadable: {exc}\n".encode(), 503
                endpoint.scrapes += 1
                self.send_response(code)
                self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)  # what generate_latest writes
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes every 15 s would flood the journal
                pass

        self.server = ThreadingHTTPServer((self.cfg.bind, self.cfg.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="cardproof-metrics", daemon=True).start()

    def tick(self, now: float) -> None:
        pass

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def status(self) -> dict:
        return {"state": "running" if self.server else "stopped", "url": self.url, "scrapes": self.scrapes}
