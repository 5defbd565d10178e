"""``busy_host``: other processes on this machine used CPU time during the cell, beside the server and cardproof.

On a CPU-only or unified-memory machine a compile, a browser or another
benchmark takes cores and memory bandwidth from the server as a foreign
process on a card takes the card from a GPU server. The cell checks read the
machine's CPU time before and after each cell (``daemon/host/load.py``); what
neither the server's process tree nor cardproof's own process used, per
second of the cell, is the share of a core the others took. A cell is the
window, so every sample of a cell gets its cell's figure.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from cardproof.marks import N_
from cardproof.daemon.host.load import foreign_cores
from .base import Canary, Gate, GateOutcome, JudgedRun, Said, SampleContext
from ..store import json_value

#: the canary's hog runs until it has used this much CPU time (or HOG_WAIT_S has passed)
HOG_CPU_S = 0.6
HOG_WAIT_S = 10.0


def check(ctx: SampleContext, threshold: float) -> GateOutcome:
    host = ctx.host
    if host is None:
        return GateOutcome(None, None, Said("no CPU reading of this machine around the cell, or the server's "
                                            "processes were not found on it"))
    text = Said("other processes used {cores:.2f} cores beside the server ({server:.2f}) and cardproof "
                "({own:.2f}); load average {load:.2f} on {total} cores",
                {"cores": host["foreign_cores"], "server": host["server_cores"], "own": host["own_cores"],
                 "load": host["load_avg"], "total": host["cores"]})
    return GateOutcome(host["foreign_cores"] > threshold, host["foreign_cores"], text)


def cell_host(store, cell_id: int) -> dict | None:
    """The cell's ``hostload.foreign_cores`` from its stored readings; None without both."""
    readings = {}
    for r in store.db.query("select phase, value_json from cell_checks where cell_id = ? and \"check\" = 'host_cpu' "
                            "and ok = 1", [cell_id]):
        readings[r["phase"]] = json_value(r["value_json"])  # a damaged reading: None, so no figure
    if not isinstance(readings.get("before"), dict) or not isinstance(readings.get("after"), dict):
        return None
    return foreign_cores(readings["before"], readings["after"])


def gather(judged: JudgedRun):
    """Per cell: the other processes' CPU time between its readings."""
    per_cell: dict[int, dict | None] = {}

    def per_sample(sample: dict, response: dict) -> dict:
        cell_id = sample["cell_id"]
        if cell_id not in per_cell:
            per_cell[cell_id] = cell_host(judged.store, cell_id)
        return {"host": per_cell[cell_id]}

    return per_sample


def _hog_until_busy(hog: subprocess.Popen) -> float:
    """Let the hog run until it has used ``HOG_CPU_S`` of CPU (a busy machine gives it less per second)."""
    deadline = time.monotonic() + HOG_WAIT_S
    used = 0.0
    while time.monotonic() < deadline:
        try:
            t = psutil.Process(hog.pid).cpu_times()
        except psutil.Error:
            break
        used = t.user + t.system
        if used >= HOG_CPU_S:
            break
        time.sleep(0.05)
    return used


def provoke(run) -> None:
    # a process of nobody's: it only burns CPU while the canary's cell is measured
    cid = run.new_cell("busy_host")
    run.snapshot(cid, "before")
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        used = _hog_until_busy(hog)
        _, t = run.sample("busy_host", cell_id=cid)
    finally:
        hog.kill()
        hog.wait()
    run.snapshot(cid, "after")
    run.plan("busy_host", sample_id=t.sample_id, detail={"hog_pid": hog.pid, "hog_cpu_s": round(used, 3)})


GATE = Gate(
    "busy_host",
    N_("other processes on this machine used CPU time during the cell"),
    check,
    default_threshold=0.5,
    # a shared machine is rarely quiet: stated and counted, the medians kept; a campaign may exclude
    default_exclude=False,
    threshold_unit="cores",
    order=65,
    canary=Canary(provoke, order=55),
    gather=gather,
)
