"""The energy counters cardproof reads, each where the machine has it; the reason where it does not.

- ``NvmlEnergy``: NVML's total energy per device (``nvmlDeviceGetTotalEnergyConsumption``: millijoules
  since the driver was loaded; Volta and newer). A 64-bit count: it does not wrap in practice.
- ``AmdSmiEnergy``: AMD's energy accumulator per GPU (``amdsmi_get_energy_count``: the accumulator
  times ``counter_resolution`` microjoules; the key is ``energy_accumulator`` since amdsmi 6.2.1,
  ``power`` before). Not supported in a virtual machine guest, as AMD documents.
- ``RaplEnergy``: RAPL's package zones under ``/sys/class/powercap`` (``intel-rapl:N``, which AMD
  Zen processors fill too): ``energy_uj`` microjoules, wrapping at ``max_energy_range_uj``. Linux
  made ``energy_uj`` readable by root alone in 2020 (the PLATYPUS power side channel,
  CVE-2020-8694); a zone it may not read is named with that reason. ``psys`` (the whole platform,
  the packages included) and the sub-zones (core, uncore, dram) are not added to the packages: they
  would count the same joules twice.

Each source: ``open()`` raises :class:`EnergyUnavailable` with the reason; ``read()`` returns one
:class:`Counter` per domain; ``close()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


class EnergyUnavailable(Exception):
    """No counter of this kind can be read here; the message says why."""


@dataclass
class Counter:
    source: str  # nvml | amdsmi | rapl | recorded-…
    domain: str  # GPU0, package-0, ...
    joules: float  # the counter's value, in joules
    wrap_joules: float | None = None  # where it starts again from zero (RAPL); None: it does not wrap


def _err(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


class NvmlEnergy:
    """Every NVIDIA device that reports its total energy."""

    kind = "nvml"

    def __init__(self, api=None, *, kind: str | None = None):
        self._api = api
        self.kind = kind or type(self).kind  # "recorded": a stand-in API replaying recorded counters
        self.devices: list[tuple[str, object]] = []
        self._opened = False

    def open(self) -> "NvmlEnergy":
        api = self._api
        if api is None:
            try:
                import pynvml as api
            except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
                raise EnergyUnavailable(f"nvidia-ml-py not installed ({exc})") from exc
            self._api = api
        try:
            api.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded: no driver
            raise EnergyUnavailable(f"no NVIDIA driver ({_err(exc)})") from exc
        self._opened = True
        refused = []
        for i in range(api.nvmlDeviceGetCount()):
            handle = api.nvmlDeviceGetHandleByIndex(i)
            try:
                api.nvmlDeviceGetTotalEnergyConsumption(handle)
            except Exception as exc:  # NotSupported before Volta, NoPermission under some MIG setups
                refused.append(f"GPU{i}: {_err(exc)}")
                continue
            self.devices.append((f"GPU{i}", handle))
        if not self.devices:
            self.close()
            raise EnergyUnavailable("no NVIDIA device reports its total energy"
                                    + (f" ({'; '.join(refused)})" if refused else " (no device)"))
        return self

    def read(self) -> list[Counter]:
        return [Counter(self.kind, name, self._api.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0)
                for name, h in self.devices]

    def close(self) -> None:
        if self._opened:
            try:
                self._api.nvmlShutdown()
            except Exception:
                pass  # a driver that went away: nothing left to release
            self._opened = False


class AmdSmiEnergy:
    """Every AMD GPU whose energy accumulator amdsmi reads."""

    kind = "amdsmi"

    def __init__(self, api=None, *, kind: str | None = None):
        self._api = api
        self.kind = kind or type(self).kind
        self.devices: list[tuple[str, object]] = []
        self._opened = False

    def open(self) -> "AmdSmiEnergy":
        api = self._api
        if api is None:
            try:
                import amdsmi as api
            except Exception as exc:  # not installed, or its native library missing
                raise EnergyUnavailable(f"amdsmi not installed ({type(exc).__name__})") from exc
            self._api = api
        try:
            api.amdsmi_init()
            handles = api.amdsmi_get_processor_handles()
        except Exception as exc:
            raise EnergyUnavailable(f"amdsmi found no AMD GPU driver ({_err(exc)})") from exc
        self._opened = True
        refused = []
        for i, handle in enumerate(handles):
            try:
                energy_joules(api.amdsmi_get_energy_count(handle))
            except Exception as exc:  # not supported in a VM guest, or on this ASIC
                refused.append(f"GPU{i}: {_err(exc)}")
                continue
            self.devices.append((f"GPU{i}", handle))
        if not self.devices:
            self.close()
            raise EnergyUnavailable("no AMD GPU reports its energy counter"
                                    + (f" ({'; '.join(refused)})" if refused else " (no device)"))
        return self

    def read(self) -> list[Counter]:
        return [Counter(self.kind, name, energy_joules(self._api.amdsmi_get_energy_count(h)))
                for name, h in self.devices]

    def close(self) -> None:
        if self._opened:
            try:
                self._api.amdsmi_shut_down()
            except Exception:
                pass
            self._opened = False


def energy_joules(count: dict) -> float:
    """Joules from ``amdsmi_get_energy_count``'s answer (accumulator × resolution in µJ)."""
    acc = count["energy_accumulator"] if "energy_accumulator" in count else count["power"]
    return float(acc) * float(count["counter_resolution"]) / 1e6


_TOP_ZONE = re.compile(r"^intel-rapl:\d+$")


class RaplEnergy:
    """RAPL's package zones from the powercap sysfs tree."""

    kind = "rapl"

    def __init__(self, root: str | Path = "/sys/class/powercap", *, kind: str | None = None):
        self.root = Path(root)
        self.kind = kind or type(self).kind
        self.zones: list[tuple[str, Path, float | None]] = []

    def open(self) -> "RaplEnergy":
        if not self.root.is_dir():
            raise EnergyUnavailable(f"no {self.root}: this kernel or virtual machine exposes no RAPL counter")
        refused = []
        for zone in sorted(p for p in self.root.iterdir() if _TOP_ZONE.match(p.name)):
            try:
                name = (zone / "name").read_text().strip()
            except OSError:
                continue
            if not name.startswith("package"):
                continue  # psys holds the packages: added to them it would count their joules twice
            try:
                int((zone / "energy_uj").read_text())
            except PermissionError:
                refused.append(f"{name}: energy_uj is readable by root only (Linux since the PLATYPUS fix, "
                               "CVE-2020-8694)")
                continue
            except (OSError, ValueError) as exc:
                refused.append(f"{name}: {_err(exc)}")
                continue
            try:
                wrap = int((zone / "max_energy_range_uj").read_text()) / 1e6
            except (OSError, ValueError):
                wrap = None
            self.zones.append((name, zone / "energy_uj", wrap))
        if not self.zones:
            raise EnergyUnavailable("no readable RAPL package zone under " + str(self.root)
                                    + (f" ({'; '.join(refused)})" if refused else ""))
        return self

    def read(self) -> list[Counter]:
        return [Counter(self.kind, name, int(path.read_text()) / 1e6, wrap) for name, path, wrap in self.zones]

    def close(self) -> None:
        pass


def default_sources() -> list:
    """Every kind of counter, in the order they are tried and shown."""
    return [NvmlEnergy(), AmdSmiEnergy(), RaplEnergy()]
