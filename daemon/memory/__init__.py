"""Memory as the card reports it, never as inferred: NVML per process, the runtime's
self-report beside it, and the gap between the two itemised from the load's facts.

The runner uses ``MemoryCapture`` (capture.py); the report reads through
``reconcile_load`` and ``budget``; ``cardproof vram`` reads a source directly.

In short, ``memory/``: card memory per process (NVML, else AMD SMI where ``amdsmi``
finds an AMD GPU: ``amdsmi.py``, GTT named beside VRAM and never added; or recorded readings), the
runtime's self-report beside it, reconciliation and the card budget. The server process's own memory
on every host (``host.py``): each load's PIDs (as ``memory_load_pids`` finds them: router child by
port, Ollama runner by blob, else the load's PID) read with psutil every second and at each cell's
start and end (``cell_start`` is a participant phase for it): RSS, USS and PSS where the OS gives
them, the anonymous/file-backed split and the kernel's high-water mark from ``/proc/PID/status``
(``host_memory_samples``), each cell's peak (``host_memory_cells``), m029. Without a card, the pin
guard compares MemAvailable now with the model's measured process peak (``budget.required_in_host``,
``host_memory_checks``), and the fit test gives a load in host memory a verdict by its process peak
against MemAvailable before it (``fit_checks.host_*``). ``report/memory.py`` shows the process
beside the self-report for every load, and Apple Metal's buffers as unified memory
"""

from .capture import MemoryCapture
from .nvml import NvmlSource
from .readings import NOT_MEASURED, DeviceReading, ProcessReading, Reading, SourceUnavailable
from .recorded import RecordedSource
from .sampler import MemorySampler

__all__ = [
    "MemoryCapture", "MemorySampler", "NvmlSource", "RecordedSource", "Reading", "DeviceReading",
    "ProcessReading", "SourceUnavailable", "NOT_MEASURED",
]
