"""AMD cards from AMD's own library: ``amdsmi`` (the Python binding of AMD SMI), per device and per process.

Where amdsmi is installed and finds an AMD GPU, ``AmdSmiSource`` gives the same :class:`Reading` as the
NVML source, so the sampler, attribution and the report read it unchanged. Documented shapes (AMD SMI
Python API): ``amdsmi_get_gpu_vram_usage`` -> ``{"vram_total", "vram_used"}`` in MB;
``amdsmi_get_gpu_process_list`` -> one dict per process: ``pid``, ``name``, ``mem`` and
``memory_usage`` (``vram_mem``, ``gtt_mem``, ``cpu_mem``) in bytes. Older bindings return process
handles, whose dicts ``amdsmi_get_gpu_process_info`` gives. GTT is system memory the GPU maps (on an
APU such as a Radeon 780M or Strix Halo most of a model lives there): it is named beside the VRAM
figure, never added to it as card memory.

A process uses an AMD GPU through ``/dev/kfd`` and ``/dev/dri/renderD*``: those device files prove a
PID is this namespace's, as ``/dev/nvidia*`` does for NVML.
"""

from __future__ import annotations

from .procinfo import ProcResolver
from .readings import DeviceReading, ProcessReading, Reading, SourceUnavailable, bytes_to_mib

AMD_DEVICE_PREFIXES = ("/dev/kfd", "/dev/dri/renderD")


class AmdSmiSource:
    """Per-device and per-process readings from AMD SMI; ``open()`` raises SourceUnavailable with the reason."""

    kind = "amdsmi"

    def __init__(self, api=None, *, resolver: ProcResolver | None = None, clock=None, kind: str | None = None):
        self._api = api
        self.kind = kind or type(self).kind
        self.resolver = resolver or ProcResolver(device_prefixes=AMD_DEVICE_PREFIXES)
        self._handles: list = []
        self._opened = False
        if clock is None:
            from ..store import utcnow

            clock = utcnow
        self._clock = clock

    @property
    def api(self):
        if self._api is None:
            try:
                import amdsmi
            except Exception as exc:  # not installed, or its native library missing
                raise SourceUnavailable(f"amdsmi not installed ({type(exc).__name__})") from exc
            self._api = amdsmi
        return self._api

    def open(self) -> "AmdSmiSource":
        if self._opened:
            return self
        try:
            self.api.amdsmi_init()
            self._handles = list(self.api.amdsmi_get_processor_handles())
        except SourceUnavailable:
            raise
        except Exception as exc:
            raise SourceUnavailable(f"amdsmi found no AMD GPU ({type(exc).__name__}: {exc})") from exc
        if not self._handles:
            raise SourceUnavailable("amdsmi found no AMD GPU")
        self._opened = True
        return self

    def close(self) -> None:
        if self._opened:
            try:
                self.api.amdsmi_shut_down()
            except Exception:
                pass
            self._opened = False

    def read(self) -> Reading:
        self.open()
        reading = Reading(ts=self._clock(), source=self.kind)
        for index, handle in enumerate(self._handles):
            device = self._device(index, handle)
            reading.devices.append(device)
            reading.processes.extend(self._processes(index, handle, device))
        return reading

    def _optional(self, fn_name: str, *args):
        fn = getattr(self.api, fn_name, None)
        try:
            return fn(*args) if fn is not None else None
        except Exception:
            return None

    def _device(self, index: int, handle) -> DeviceReading:
        vram = self.api.amdsmi_get_gpu_vram_usage(handle)
        total, used = float(vram["vram_total"]), float(vram["vram_used"])
        asic = self._optional("amdsmi_get_gpu_asic_info", handle) or {}
        activity = self._optional("amdsmi_get_gpu_activity", handle) or {}
        util = activity.get("gfx_activity")
        return DeviceReading(index=index, name=asic.get("market_name"),
                             uuid=self._optional("amdsmi_get_gpu_device_uuid", handle),
                             total_mib=total, used_mib=used, free_mib=round(total - used, 3),
                             util_gpu_pct=util if isinstance(util, (int, float)) else None)

    def _processes(self, index: int, handle, device: DeviceReading) -> list[ProcessReading]:
        try:
            listed = list(self.api.amdsmi_get_gpu_process_list(handle))
        except Exception as exc:  # not supported on this platform or without rights: the device row says so
            device.reason = f"process list: {type(exc).__name__}"
            return []
        out = []
        for entry in listed:
            info = entry if isinstance(entry, dict) else self.api.amdsmi_get_gpu_process_info(handle, entry)
            usage = info.get("memory_usage") or {}
            vram = usage.get("vram_mem")
            name, status, reason = self.resolver.describe(int(info["pid"]))
            gtt = usage.get("gtt_mem")
            if gtt:
                reason = "; ".join(filter(None, [reason, f"GTT (system memory the GPU maps) {bytes_to_mib(gtt)} MiB"]))
            out.append(ProcessReading(device_index=index, pid=int(info["pid"]),
                                      used_mib=bytes_to_mib(vram) if isinstance(vram, (int, float)) else None,
                                      kind="compute", name=name, pid_status=status, reason=reason))
        return out
