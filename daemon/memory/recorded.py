"""Recorded readings: the NVML API answered from a JSON fixture.

No NVIDIA GPU exists on the machines this project is built on. ``RecordedNvml``
offers the pynvml functions ``NvmlSource`` calls, with answers recorded in a
fixture (values taken from the seeds and NVIDIA's NVML reference, sources
named in the fixture itself). Errors are pynvml's own exception classes, so
fall-backs (``_v3`` missing, graphics lists unsupported, no driver) run the
same branches as on a real card. Readings made this way are stored with
``source = 'recorded'``, never as ``nvml``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from .nvml import NvmlSource
from .procinfo import ProcResolver


def _nvml_error(name: str):
    """The pynvml exception for an NVML return code name (``FUNCTION_NOT_FOUND``)."""
    import pynvml

    return pynvml.NVMLError(getattr(pynvml, f"NVML_ERROR_{name}"))


class RecordedNvml:
    """A stand-in for the ``pynvml`` module, one fixture tick per ``advance()``.

    ``pids`` fills placeholders such as ``"$SERVER"`` in the fixture with real
    PIDs of the test's own processes, so /proc lookups see live processes.
    """

    def __init__(self, fixture: dict, pids: dict[str, int] | None = None):
        self.fixture = fixture
        self.pids = {f"${k}": v for k, v in (pids or {}).items()}
        self.devices = fixture["devices"]
        self.ticks = fixture["ticks"]
        self.missing = set(fixture.get("missing_functions", []))
        self.unsupported = set(fixture.get("unsupported_functions", []))
        self.tick = 0
        self.initialised = 0
        for name in self.missing:
            # a driver without the symbol: pynvml raises FunctionNotFound on call
            setattr(self, name, self._raiser("FUNCTION_NOT_FOUND"))
        for name in self.unsupported:
            setattr(self, name, self._raiser("NOT_SUPPORTED"))

    @staticmethod
    def _raiser(code: str):
        def fn(*_args, **_kw):
            raise _nvml_error(code)

        return fn

    def advance(self) -> None:
        """Move to the next recorded tick; the last one repeats when they run out."""
        self.tick = min(self.tick + 1, len(self.ticks) - 1)

    def _now(self) -> dict:
        return self.ticks[self.tick]

    def _pid(self, value) -> int:
        if isinstance(value, str) and value.startswith("$"):
            if value not in self.pids:
                raise ValueError(f"fixture PID placeholder {value} has no PID (pass pids={{{value[1:]!r}: ...}})")
            return int(self.pids[value])
        return int(value)

    # -- the pynvml functions NvmlSource uses -------------------------------
    def nvmlInit(self):
        if self.fixture.get("init_error"):
            raise _nvml_error(self.fixture["init_error"])
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, h):
        return self.devices[h]["name"]

    def nvmlDeviceGetUUID(self, h):
        return self.devices[h]["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h):
        total = self.devices[h]["total_bytes"]
        used = self._now()["devices"][h]["used_bytes"]
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h):
        u = self._now()["devices"][h].get("util", {})
        return SimpleNamespace(gpu=u.get("gpu"), memory=u.get("memory"))

    def _pcie(self, h, key):
        tick = self._now()["devices"][h].get("pcie", {})
        return tick.get(key, self.devices[h].get("pcie", {}).get(key))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._pcie(h, "gen_current")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._pcie(h, "gen_max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._pcie(h, "width_current")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._pcie(h, "width_max")

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        """Millijoules since the driver loaded (a tick's ``energy_mj``); NotSupported where none was recorded,
        as NVML answers on a card before Volta."""
        energy = self._now()["devices"][h].get("energy_mj")
        if energy is None:
            raise _nvml_error("NOT_SUPPORTED")
        return energy

    def _procs(self, h, kind):
        out = []
        for p in self._now().get("processes", []):
            if p["device"] == h and kind in p.get("kind", "compute"):
                # pynvml maps NVML_VALUE_NOT_AVAILABLE to None; the fixture writes null
                out.append(SimpleNamespace(pid=self._pid(p["pid"]), usedGpuMemory=p["used_bytes"]))
        return out

    def nvmlDeviceGetComputeRunningProcesses_v3(self, h):
        return self._procs(h, "compute")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h):
        return self._procs(h, "compute")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return self._procs(h, "compute")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, h):
        return self._procs(h, "graphics")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, h):
        return self._procs(h, "graphics")

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return self._procs(h, "graphics")


class RecordedSource(NvmlSource):
    """``NvmlSource`` over a fixture: same methods, ``kind = 'recorded'``.

    Each ``read()`` returns the next recorded tick. ``device_prefixes``
    replaces ``/dev/nvidia`` for the PID-namespace check, because the stand-in
    processes of a test cannot hold a real NVIDIA device file.
    """

    kind = "recorded"

    def __init__(self, fixture: dict | str | Path, *, pids: dict[str, int] | None = None,
                 device_prefixes=None, clock=None, ttl_s: float = 0.0):
        if not isinstance(fixture, dict):
            fixture = json.loads(Path(fixture).read_text())
        self.recorded = RecordedNvml(fixture, pids)
        prefixes = device_prefixes or fixture.get("device_prefixes") or ("/dev/nvidia",)
        # ttl 0 by default: tests kill stand-ins and expect the next read to notice
        super().__init__(self.recorded, resolver=ProcResolver(device_prefixes=prefixes, ttl_s=ttl_s), clock=clock)
        self._first = True

    def read(self):
        if self._first:
            self._first = False  # the first read shows tick 0
        else:
            self.recorded.advance()
        return super().read()
