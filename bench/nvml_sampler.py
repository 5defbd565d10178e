"""What does the NVML sampler cost? CPU seconds per hour at 1 Hz and 10 Hz.

Runs the real MemorySampler (thread, SQLite writes in WAL mode, /proc
lookups) for --seconds at each rate, and an idle baseline of the same length
in the same run, and prints the process CPU time extrapolated to one hour.
On a machine without a GPU the readings come from the recorded source (the
seeds' two RTX 3090 with a server, a neighbour and a desktop process); the
NVML calls themselves are then not in the figure. With ``--real`` it samples
the driver instead.

    python bench/nvml_sampler.py [--seconds 10] [--real]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from cardproof.daemon.memory import MemorySampler, NvmlSource, RecordedSource, SourceUnavailable
from cardproof.daemon.store import open_store, utcnow

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "nvml" / "seed_two_3090.json"


def cpu_over(seconds: float, body=None) -> tuple[float, int]:
    """Process CPU seconds (all threads) spent while ``body`` runs for ``seconds``."""
    t0 = time.process_time()
    ticks = body(seconds) if body else (time.sleep(seconds) or 0)
    return time.process_time() - t0, ticks


def make_source(real: bool):
    if real:
        return NvmlSource().open()
    # three live PIDs so /proc lookups happen as on a card; the same 5 s cache as the real source
    pids = {"SERVER": os.getpid(), "NEIGHBOUR": os.getppid(), "DESKTOP": 1}
    return RecordedSource(FIXTURE, pids=pids, ttl_s=5.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--real", action="store_true", help="sample the NVIDIA driver instead of the recording")
    args = ap.parse_args(argv)
    try:
        make_source(args.real)
    except SourceUnavailable as exc:
        print(f"no NVIDIA driver for --real: {exc}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.db")
        cid = store.insert("campaigns", {"name": "bench", "sha256": "-", "registered_at": utcnow()})
        run_id = store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": "running"})

        def sampled(hz):
            def body(seconds):
                sampler = MemorySampler(store, make_source(args.real), run_id=run_id, interval_s=1.0 / hz).start()
                time.sleep(seconds)
                sampler.stop()
                if sampler.errors:
                    raise SystemExit(f"sampler errors: {sampler.errors[:3]}")
                return sampler.ticks
            return body

        base_cpu, _ = cpu_over(args.seconds)
        rows = [("baseline (idle)", base_cpu, None)]
        for hz in (1, 10):
            cpu, ticks = cpu_over(args.seconds, sampled(hz))
            rows.append((f"{hz} Hz", cpu, ticks))
        per_tick_rows = store.db.execute("select count(*) from memory_samples").fetchone()[0]
        store.close()
    src = "NVML" if args.real else "recorded source (2 devices, 4 processes per tick; NVML calls not included)"
    print(f"sampler CPU cost, {args.seconds:g} s per measurement, {src}; {per_tick_rows} rows written")
    print(f"{'':<16}{'ticks':>7}{'CPU s':>9}{'CPU s/h':>10}{'above baseline CPU s/h':>25}")
    for name, cpu, ticks in rows:
        per_hour = cpu / args.seconds * 3600
        above = (cpu - base_cpu) / args.seconds * 3600
        print(f"{name:<16}{ticks if ticks is not None else '-':>7}{cpu:>9.3f}{per_hour:>10.1f}"
              f"{'-' if ticks is None else f'{above:.1f}':>25}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
