"""Memory as the card reports it, never as inferred: NVML per process, the runtime's
self-report beside it, and the gap between the two itemised from the load's facts.

The runner uses ``MemoryCapture`` (capture.py); the report reads through
``reconcile_load`` and ``budget``; ``cardproof vram`` reads a source directly.
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
