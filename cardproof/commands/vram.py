"""``cardproof vram``: what the card shows now, per device and per process."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click


def _device_line(d) -> str:
    pcie = ""
    if d.pcie_gen_current is not None or d.pcie_width_current is not None:
        pcie = (f", PCIe gen {d.pcie_gen_current or '?'}/{d.pcie_gen_max or '?'}"
                f" x{d.pcie_width_current or '?'}/{d.pcie_width_max or '?'} (current/max)")
    util = f", util {d.util_gpu_pct:g} %" if d.util_gpu_pct is not None else ""
    return (f"GPU{d.index} {d.name or '?'}: {d.used_mib:,.0f} / {d.total_mib:,.0f} MiB used, "
            f"{d.free_mib:,.0f} MiB free{util}{pcie}")


def _process_line(p) -> str:
    used = f"{p.used_mib:,.0f} MiB" if p.used_mib is not None else "memory not reported by the driver"
    if p.pid_status in ("foreign", "mismatch"):
        who = f"pid {p.pid} (not a PID of this namespace: {p.reason})"
    else:
        who = f"pid {p.pid} {p.name or '?'}"
    return f"  GPU{p.device_index} {who}: {used} ({p.kind})"


@click.command("vram")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (available: false without a driver).")
@click.option("--interval", "interval_s", type=float, default=1.0, show_default=True,
              help="Seconds between readings when --count > 1.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True, help="Number of readings.")
@click.option("--recorded", type=click.Path(exists=True, dir_okay=False, path_type=Path), hidden=True,
              help="Replay a recorded NVML fixture instead of the driver (tests, demos).")
@click.option("--recorded-pid", "recorded_pids", multiple=True, hidden=True, metavar="NAME=PID",
              help="Fill a $NAME placeholder of the recorded fixture with a PID.")
def vram(as_json: bool, interval_s: float, count: int, recorded: Path | None, recorded_pids) -> None:
    """Card memory now: per device (used/free/total, utilisation, PCIe link) and per process.

    Read from NVML, never from a runtime. Without an NVIDIA driver it says
    so and exits 0 (with --json: "available": false).
    """
    from cardproof.daemon.memory import NOT_MEASURED, NvmlSource, RecordedSource, SourceUnavailable

    pids = dict(item.split("=", 1) for item in recorded_pids)
    source = RecordedSource(recorded, pids=pids) if recorded else NvmlSource()
    try:
        source.open()
    except SourceUnavailable as exc:
        if as_json:
            click.echo(json.dumps({"available": False, "source": source.kind, "message": NOT_MEASURED,
                                   "reason": str(exc), "readings": []}, indent=1))
        else:
            click.echo(f"{NOT_MEASURED}: {exc}")
        return
    readings = []
    try:
        for i in range(count):
            if i:
                time.sleep(interval_s)
            r = source.read()
            readings.append(r)
            if not as_json:
                click.echo(f"{r.ts} ({r.source})")
                for d in r.devices:
                    click.echo(_device_line(d))
                for p in r.processes:
                    click.echo(_process_line(p))
                sys.stdout.flush()
    finally:
        source.close()
    if as_json:
        click.echo(json.dumps({"available": True, "source": source.kind,
                               "readings": [r.to_dict() for r in readings]}, indent=1))


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (vram,)
