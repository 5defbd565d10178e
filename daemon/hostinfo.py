"""What the run happened on: host name and the GPU inventory from NVML."""

from __future__ import annotations

import platform
import socket


def gpu_inventory() -> dict:
    """GPUs as NVML sees them, or ``available: false`` with the reason.

    Never guessed: without an NVIDIA driver the inventory says so.
    """
    try:
        import pynvml
    except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency
        return {"available": False, "reason": "nvidia-ml-py not installed", "gpus": []}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return {"available": False, "reason": f"no NVIDIA driver ({exc})", "gpus": []}
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            entry = {
                "index": i,
                "name": name.decode() if isinstance(name, bytes) else name,
                "memory_total_mib": round(mem.total / 2**20, 1),
            }
            for key, fn in (
                ("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
                ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
                ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
            ):
                try:
                    entry[key] = getattr(pynvml, fn)(h)
                except Exception:
                    entry[key] = None
            gpus.append(entry)
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
        except Exception:
            driver = None
        return {"available": True, "driver": driver, "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def host_name() -> str:
    return socket.gethostname()


def host_facts() -> dict:
    return {
        "host": host_name(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
