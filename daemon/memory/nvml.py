"""The real source: NVML through pynvml (nvidia-ml-py).

``NvmlSource`` takes the NVML API as a parameter. In production that is the
``pynvml`` module; the recorded-reading tests hand it ``RecordedNvml`` (same
function names, answers from a JSON fixture), so the code below is the code
that runs on a GPU box, line for line.
"""

from __future__ import annotations

from .procinfo import NVIDIA_DEVICE_PREFIXES, ProcResolver
from .readings import DeviceReading, ProcessReading, Reading, SourceUnavailable, bytes_to_mib


def _text(value) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlSource:
    """Per-device and per-process readings from the NVIDIA driver.

    ``open()`` raises SourceUnavailable with the driver's own reason when
    there is no driver; ``read()`` returns one Reading.
    """

    kind = "nvml"

    def __init__(self, api=None, *, resolver: ProcResolver | None = None, clock=None):
        self._api = api
        self.resolver = resolver or ProcResolver(device_prefixes=NVIDIA_DEVICE_PREFIXES)
        self._handles: list = []
        self._opened = False
        self.unavailable_reason: str | None = None
        if clock is None:
            from ..store import utcnow

            clock = utcnow
        self._clock = clock

    @property
    def api(self):
        if self._api is None:
            try:
                import pynvml
            except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
                raise SourceUnavailable(f"nvidia-ml-py not installed ({exc})") from exc
            self._api = pynvml
        return self._api

    # -- lifecycle --------------------------------------------------------
    def open(self) -> "NvmlSource":
        """Initialise NVML once; raises SourceUnavailable (reason kept) without a driver."""
        if self._opened:
            return self
        try:
            self.api.nvmlInit()
            count = self.api.nvmlDeviceGetCount()
            self._handles = [self.api.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except SourceUnavailable as exc:
            self.unavailable_reason = str(exc)
            raise
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, NoPermission, ...
            self.unavailable_reason = f"{type(exc).__name__}: {exc}"
            raise SourceUnavailable(self.unavailable_reason) from exc
        self._opened = True
        return self

    def close(self) -> None:
        if self._opened:
            try:
                self.api.nvmlShutdown()
            except Exception:
                pass  # shutting down a driver that went away is not an error worth raising
            self._opened = False

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    # -- reading ----------------------------------------------------------
    def read(self) -> Reading:
        """One look at every device and every process on it, timestamped now."""
        self.open()
        ts = self._clock()
        reading = Reading(ts=ts, source=self.kind)
        for index, handle in enumerate(self._handles):
            device = self._device(index, handle)
            reading.devices.append(device)
            reading.processes.extend(self._processes(index, handle, device))
        return reading

    def _optional(self, fn_name: str, handle):
        """Values a card may not support (PCIe on some boards, utilisation under MIG)."""
        fn = getattr(self.api, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(handle)
        except Exception:
            return None

    def _device(self, index: int, handle) -> DeviceReading:
        mem = self.api.nvmlDeviceGetMemoryInfo(handle)
        util = self._optional("nvmlDeviceGetUtilizationRates", handle)
        return DeviceReading(
            index=index,
            name=_text(self._optional("nvmlDeviceGetName", handle)),
            uuid=_text(self._optional("nvmlDeviceGetUUID", handle)),
            total_mib=bytes_to_mib(mem.total),
            used_mib=bytes_to_mib(mem.used),
            free_mib=bytes_to_mib(mem.free),
            util_gpu_pct=getattr(util, "gpu", None),
            util_mem_pct=getattr(util, "memory", None),
            pcie_gen_current=self._optional("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            pcie_gen_max=self._optional("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            pcie_width_current=self._optional("nvmlDeviceGetCurrPcieLinkWidth", handle),
            pcie_width_max=self._optional("nvmlDeviceGetMaxPcieLinkWidth", handle),
        )

    def _process_list(self, handle, family: str) -> list:
        """``_v3`` where the driver has it, then ``_v2``, then the unversioned call.

        Older drivers lack the ``_v3`` symbol (NVMLError_FunctionNotFound); the
        structs differ only in fields we do not read.
        """
        last_exc = None
        for suffix in ("_v3", "_v2", ""):
            fn = getattr(self.api, f"nvmlDeviceGet{family}RunningProcesses{suffix}", None)
            if fn is None:
                continue
            try:
                return list(fn(handle))
            except Exception as exc:
                if "FunctionNotFound" in type(exc).__name__ or "Function Not Found" in str(exc):
                    last_exc = exc
                    continue
                raise
        if last_exc is not None:
            raise last_exc
        return []

    def _processes(self, index: int, handle, device: DeviceReading) -> list[ProcessReading]:
        by_pid: dict[int, ProcessReading] = {}
        for family, kind in (("Compute", "compute"), ("Graphics", "graphics")):
            try:
                infos = self._process_list(handle, family)
            except Exception as exc:
                # NotSupported / NoPermission: the device row says so, the tick goes on.
                # Anything else is a real failure and reaches the sampler's error list.
                if not any(k in type(exc).__name__ for k in ("NotSupported", "NoPermission")):
                    raise
                note = f"{family.lower()} process list: {type(exc).__name__}"
                device.reason = f"{device.reason}; {note}" if device.reason else note
                continue
            for info in infos:
                pid = int(info.pid)
                used = getattr(info, "usedGpuMemory", None)
                if pid in by_pid:
                    # one process with both contexts: NVML reports the same memory twice
                    by_pid[pid].kind = "compute+graphics"
                    continue
                name, status, reason = self.resolver.describe(pid)
                if used is None:
                    reason = "; ".join(filter(None, [reason, "per-process memory not reported by the driver"]))
                by_pid[pid] = ProcessReading(
                    device_index=index,
                    pid=pid,
                    used_mib=bytes_to_mib(used),
                    kind=kind,
                    name=name,
                    pid_status=status,
                    reason=reason,
                )
        return list(by_pid.values())


def open_default_source():
    """The real NVML source, opened; raises SourceUnavailable without a driver."""
    return NvmlSource().open()
