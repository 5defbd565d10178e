"""Energy from the machine's own counters, read at each cell's start and end (``capture.py``).

``counters.py`` holds the sources (NVML, amdsmi, RAPL under /sys/class/powercap), each read only where
it can be and otherwise stating why not; ``perf.py`` turns two readings and a cell's samples into joules
per token. The report reads through ``perf.cell_energy``.
"""

from .capture import EnergyCapture
from .counters import AmdSmiEnergy, Counter, EnergyUnavailable, NvmlEnergy, RaplEnergy, default_sources

__all__ = ["EnergyCapture", "Counter", "EnergyUnavailable", "NvmlEnergy", "AmdSmiEnergy", "RaplEnergy",
           "default_sources"]
