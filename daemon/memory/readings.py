"""What one look at the card returns: devices and the processes on them.

Both sources (the real NVML one and the recorded one) produce these objects,
so everything downstream (sampler, attribution, CLI) has one code path.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from cardproof.marks import N_

# The one sentence the DB and the report carry when there is no driver.
# It names what is missing; it never hands over to a self-report.
NOT_MEASURED = N_("card memory: not measured (no NVIDIA driver)")

MIB = 2**20

# llama.cpp backend device names that live on a card. ``CUDA_Host`` and
# ``CPU_Mapped`` are host memory even though one of them says CUDA.
_CARD_DEVICE = re.compile(r"^(CUDA|ROCm|HIP|Vulkan|SYCL|MUSA|CANN|Metal|OpenCL)\d*$")


def is_card_device(name: str | None) -> bool:
    """True for llama.cpp device names that are GPU memory (CUDA0, ROCm1, ...)."""
    return bool(name) and bool(_CARD_DEVICE.match(name))


def bytes_to_mib(value) -> float | None:
    """NVML speaks bytes; the store speaks MiB. ``None`` stays ``None``."""
    if value is None:
        return None
    return round(value / MIB, 3)


class SourceUnavailable(Exception):
    """The card cannot be read (no driver, no library); the message says why."""


@dataclass
class DeviceReading:
    index: int
    name: str | None
    uuid: str | None
    total_mib: float
    used_mib: float
    free_mib: float
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    reason: str | None = None  # what the driver would not say for this device


@dataclass
class ProcessReading:
    """One process on one device, as the driver reports it.

    ``pid_status`` says whether the PID belongs to this PID namespace:
    ``local`` (exists here and holds a GPU device file), ``local_unverified``
    (exists here, its open files cannot be read), ``foreign`` (no such PID
    here: the driver reports host PIDs) or ``mismatch`` (a process with that
    PID exists here but holds no GPU device file, so it is not the one the
    driver means). ``name`` is only filled for the first two.
    """

    device_index: int
    pid: int
    used_mib: float | None  # None: the driver does not report it (WDDM, MIG without rights)
    kind: str  # compute | graphics | compute+graphics
    name: str | None = None
    pid_status: str = "local_unverified"
    reason: str | None = None

    @property
    def attributable(self) -> bool:
        """Only PIDs of our own namespace can be matched to a server process."""
        return self.pid_status in ("local", "local_unverified")


@dataclass
class Reading:
    ts: str
    source: str  # nvml | recorded
    devices: list[DeviceReading] = field(default_factory=list)
    processes: list[ProcessReading] = field(default_factory=list)

    def processes_of(self, pids) -> list[ProcessReading]:
        """Rows of the given (local) PIDs; foreign PIDs never match a local one."""
        wanted = set(pids)
        return [p for p in self.processes if p.pid in wanted and p.attributable]

    def used_by(self, pids) -> float | None:
        """MiB on all devices used by ``pids``; None if the driver withheld a value."""
        rows = self.processes_of(pids)
        if any(p.used_mib is None for p in rows):
            return None
        return round(sum(p.used_mib for p in rows), 3)

    def to_dict(self) -> dict:
        return asdict(self)
