"""What the run happened on: host name, CPU, the machine's load and the GPU inventory from NVML."""

from __future__ import annotations

import os
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


def cpu_name() -> str | None:
    """The CPU's model name as the kernel states it (``/proc/cpuinfo``), else the platform's; None where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                # x86 says "model name"; many ARM kernels only "Hardware" or "Model"
                if key.strip() in ("model name", "Hardware", "Model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def load_average() -> float | None:
    """The 1-minute load average (runnable processes), or None where the system has none (Windows)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def run_host() -> dict:
    """The machine as a run's row keeps it (``runs.host_json``): CPU model, logical CPUs, load at the start.

    A comparison of two runs names a different CPU or a machine busier by a core or more
    (report/history/conditions.py); the load at the run's end is added by ``run_record.finish_run``.
    """
    return {"cpu": cpu_name(), "cpus": os.cpu_count(), "load_1m": {"start": load_average()}}
