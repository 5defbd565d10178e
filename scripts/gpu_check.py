"""Check the real NVML path on a machine with an NVIDIA GPU, in one command.

    python scripts/gpu_check.py [--mib 1024] [--device 0] [--tolerance-mib 8]

A child process creates a CUDA context, then allocates exactly --mib MiB.
cardproof (MemoryCapture: sampler, PID resolution, steady state, attribution
from the stored rows) must attribute the difference to that child's PID
within --tolerance-mib. The allocator is torch, else cupy, else the CUDA
driver API through ctypes (libcuda.so.1 ships with every NVIDIA driver).
Prints one PASS/FAIL line per check; exit 0 all passed, 1 a check failed,
2 the check could not run here (no driver, no way to allocate).

Energy: cardproof's NVML energy counter (EnergyCapture) must open, measure the
card's idle draw over 2 s within (0, the card's enforced power limit], and
store a cell's joules around the allocation, read at its start and end.

``--recorded-selftest`` runs the same checks against a recorded source and a
stand-in child, so the script itself is tested on machines without a GPU.
"""

from __future__ import annotations

import argparse
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cardproof.daemon.energy import EnergyCapture, NvmlEnergy
from cardproof.daemon.energy.perf import cell_energy, idle_draw
from cardproof.daemon.memory import NvmlSource, RecordedSource, SourceUnavailable
from cardproof.daemon.memory.attribution import tick_series
from cardproof.daemon.memory.capture import MemoryCapture
from cardproof.daemon.store import open_store, utcnow

# The child: make a context, say so, wait; allocate, say so, wait.
CHILD = r"""
import ctypes, os, sys
mib, device = int(sys.argv[1]), int(sys.argv[2])
alloc = None
try:
    import torch
    torch.cuda.set_device(device); torch.zeros(1, device="cuda")
    def alloc():
        global keep; keep = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
    how = "torch"
except Exception:
    try:
        import cupy
        cupy.cuda.Device(device).use(); cupy.zeros(1)
        def alloc():
            global keep; keep = cupy.cuda.memory.alloc(mib * 2**20)
        how = "cupy"
    except Exception:
        cuda = ctypes.CDLL("libcuda.so.1")
        def ok(rc, what):
            if rc != 0: print(f"error {what} rc={rc}", flush=True); sys.exit(3)
        ok(cuda.cuInit(0), "cuInit"); dev = ctypes.c_int(); ok(cuda.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        ctx = ctypes.c_void_p(); ok(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
        def alloc():
            ptr = ctypes.c_uint64(); ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(mib * 2**20)), "cuMemAlloc")
        how = "libcuda"
print("context", how, flush=True)
sys.stdin.readline(); alloc(); print("allocated", flush=True)
sys.stdin.readline()
"""


class Child:
    """The allocating child (real) or a stand-in that only talks the protocol (self-test)."""

    def __init__(self, mib: int, device: int, *, standin_file: Path | None = None):
        # the stand-in holds standin_file open the way a CUDA process holds /dev/nvidia0
        code = CHILD if standin_file is None else (
            "import sys\nheld = open(sys.argv[3], 'w')\nprint('context standin', flush=True)\n"
            "sys.stdin.readline()\nprint('allocated', flush=True)\nsys.stdin.readline()\n"
        )
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(mib), str(device), str(standin_file)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def expect(self, word: str, timeout_s: float = 120.0) -> str:
        """The child's next line, which must start with ``word`` (importing torch can take a while)."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise RuntimeError(f"child said nothing within {timeout_s:g} s (waiting for {word!r})")
        line = self.proc.stdout.readline().strip()
        if not line.startswith(word):
            raise RuntimeError(f"child said {line!r}, expected {word!r}")
        return line

    def say(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def run_checks(source, child: Child, mib: int, tolerance_mib: float, on_step=None) -> list[tuple[bool, str]]:
    """Drive cardproof's capture path around the child; return (passed, text) per check."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "gpu_check.db")
        cid = store.insert("campaigns", {"name": "gpu_check", "sha256": "-", "registered_at": utcnow()})
        run_id = store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": "running"})
        model_id = store.upsert_model({"name": "gpu_check child", "digest": "-"})
        cap = MemoryCapture(store, run_id, source=source, interval_s=0.1, settle_poll_s=0.2).start()
        if not cap.available:
            return [(False, f"card not readable: {cap.sampler.reason}")]
        energy = EnergyCapture(store, run_id, sources=[NvmlEnergy(source.api)]).start()
        results.extend(_idle_checks(store, run_id, energy, source.api))
        child.expect("context")
        if on_step:
            on_step("context")
        cell_id = store.insert("cells", {"run_id": run_id, "model_id": None, "position": 0, "kind": "measure"})
        energy.cell_start(cell_id)

        def load(name):
            now = utcnow()
            return store.insert("loads", {"run_id": run_id, "model_id": model_id, "requested_at": now,
                                          "ready_at": now, "status": "loaded", "pid": child.pid, "trigger": name})

        base_load = load("context")
        base = cap.after_load(base_load, pid=child.pid)
        results.append((base["status"] == "steady" and base["total_mib"] is not None,
                        f"child PID {child.pid} seen on the card with its context: "
                        f"{base['total_mib']} MiB ({base['status']})"))
        child.say()
        child.expect("allocated")
        if on_step:
            on_step("allocated")
        after_load = load("allocated")
        after = cap.after_load(after_load, pid=child.pid)
        time.sleep(0.5)  # a few sampler ticks of the allocated state
        energy.cell_end(cell_id)
        energy.stop()
        cell = cell_energy(store.db, cell_id).get(energy.sources[0].kind) or {}
        results.append((bool(cell) and cell["joules"] > 0 and cell["seconds"] > 0,
                        f"energy over the allocation, read at the cell's start and end: "
                        + (f"{cell['joules']:.1f} J in {cell['seconds']:.2f} s" if cell else "no figure")))
        store.update("loads", base_load, {"ended_at": after["ts_from"]})
        cap.stop()
        delta = (after["total_mib"] or 0) - (base["total_mib"] or 0)
        results.append((abs(delta - mib) <= tolerance_mib,
                        f"allocation of {mib} MiB attributed to PID {child.pid}: +{delta:.1f} MiB "
                        f"(tolerance {tolerance_mib:g} MiB)"))
        # the sampler thread's own rows, independent of the steady-state reads
        ticks = tick_series(store.db, run_id, [child.pid], ts_from=after["ts_to"])
        median = statistics.median(t["total_mib"] for t in ticks) if ticks else None
        results.append((median is not None and abs(median - (after["total_mib"] or 0)) <= tolerance_mib,
                        f"sampler rows after the allocation: median {median} MiB over {len(ticks)} ticks"))
        row = store.db.execute(
            "select pid_status, process_name from memory_samples where pid = ? and scope = 'process' "
            "order by id desc limit 1",  # the latest: a tick before the child opened the device can say mismatch
            [child.pid],
        ).fetchone()
        results.append((row is not None and row[0] in ("local", "local_unverified") and bool(row[1]),
                        f"PID {child.pid} resolved in this namespace: status {row and row[0]}, name {row and row[1]}"
                        + ("" if row and row[0] in ("local", "local_unverified")
                           else " (in a container, run with --pid=host: the driver reports host PIDs)")))
        ticks = store.db.execute("select count(distinct ts) from memory_samples where scope = 'device'").fetchone()[0]
        results.append((ticks >= 3, f"sampler wrote {ticks} device ticks"))
        store.close()
    return results


def _idle_checks(store, run_id: int, energy: EnergyCapture, api) -> list[tuple[bool, str]]:
    """The counter opened, and the idle draw it measured is a card's: above zero, at most its power limit."""
    if not energy.readable:
        return [(False, f"energy counter not readable: {'; '.join(energy.reasons.values())}")]
    watts = (idle_draw(store.db, run_id).get(energy.sources[0].kind) or {}).get("watts")
    try:
        limit = api.nvmlDeviceGetEnforcedPowerLimit(api.nvmlDeviceGetHandleByIndex(0)) / 1000.0
    except Exception:  # noqa: BLE001 -- a card that does not say its limit: only the lower bound is checked
        limit = None
    ok = watts is not None and watts > 0 and (limit is None or watts <= limit)
    shown = f"{watts:.1f}" if watts is not None else "none"
    return [(ok, f"idle draw from the energy counter over {energy.idle_s:g} s: {shown} W "
                 f"(power limit {f'{limit:.1f} W' if limit is not None else 'not reported'})")]


class _SelftestEnergy:
    """The recorded API with an energy counter that runs at ``watts`` on the monotonic clock."""

    def __init__(self, api, watts: float):
        self._api, self.watts = api, watts

    def __getattr__(self, name):
        return getattr(self._api, name)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int(time.monotonic() * self.watts * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000


def selftest_source(mib: int, child_pid: int, steps: dict, device_file: Path, skew_mib: int = 0,
                    watts: float = 70.0) -> RecordedSource:
    """A recorded source whose child grows by ``mib`` once the child says 'allocated'."""
    dev = {"name": "recorded", "uuid": "GPU-selftest", "total_bytes": 81920 * 2**20,
           "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}}

    def tick(used):
        return {"devices": [{"used_bytes": (used + 500) * 2**20, "util": {"gpu": 0, "memory": 0}}],
                "processes": [{"device": 0, "pid": "$CHILD", "used_bytes": used * 2**20, "kind": "compute"}]}

    src = RecordedSource({"devices": [dev], "ticks": [tick(0)]}, pids={"CHILD": child_pid},
                         device_prefixes=[str(device_file)])
    real_read = src.read

    def read():
        used = 0 if "context" not in steps else (312 if "allocated" not in steps else 312 + mib + skew_mib)
        src.recorded.ticks = [tick(used)]
        src.recorded.tick = 0
        return real_read()

    src.read = read
    src._api = _SelftestEnergy(src.recorded, watts)
    return src


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--tolerance-mib", type=float, default=8.0)
    ap.add_argument("--recorded-selftest", action="store_true")
    ap.add_argument("--selftest-skew-mib", type=int, default=0, help=argparse.SUPPRESS)  # proves FAIL can happen
    ap.add_argument("--selftest-watts", type=float, default=70.0, help=argparse.SUPPRESS)  # beyond the limit: FAIL
    args = ap.parse_args(argv)
    steps: dict = {}
    if args.recorded_selftest:
        held = Path(tempfile.mkdtemp()) / "nvidia0"
        child = Child(args.mib, args.device, standin_file=held)
        source = selftest_source(args.mib, child.pid, steps, held, args.selftest_skew_mib, args.selftest_watts)
        print("recorded self-test: checks the script, not a card")
    else:
        source = NvmlSource()
        try:
            source.open()
        except SourceUnavailable as exc:
            print(f"SKIP: no NVIDIA driver here, the real path cannot be checked ({exc})")
            return 2
        child = Child(args.mib, args.device)
    try:
        results = run_checks(source, child, args.mib, args.tolerance_mib, on_step=lambda s: steps.setdefault(s, 1))
    except RuntimeError as exc:
        print(f"SKIP: the child could not allocate on the card ({exc}); it needs torch, cupy or libcuda.so.1")
        return 2
    finally:
        child.stop()
        if args.recorded_selftest:
            shutil.rmtree(held.parent, ignore_errors=True)
    for ok, text in results:
        print(("PASS " if ok else "FAIL ") + text)
    passed = all(ok for ok, _ in results)
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
