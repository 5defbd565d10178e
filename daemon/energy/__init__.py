"""Energy from the machine's own counters, read at each cell's start and end (``capture.py``).

``counters.py`` holds the sources (NVML, amdsmi, RAPL under /sys/class/powercap), each read only where
it can be and otherwise stating why not; ``perf.py`` turns two readings and a cell's samples into joules
per token. The report reads through ``perf.cell_energy``.

In short, ``energy/``: energy counters (``counters.py``: NVML's total energy per
device, ``amdsmi``'s accumulator, RAPL package zones under ``/sys/class/powercap``, each opened
where it can be and otherwise storing why not), read by the ``Energy`` participant around a 2 s idle
wait before the first cell and at each cell's start and end (``energy_readings``, m029); ``perf.py``
gives a cell's joules and mean draw per source (a wrapped RAPL counter gets its range back; psys and
sub-zones are never added to the packages) and joules per generated and per prompt token, the draw
split by the server's own decode and prefill time. ``report/energy.py`` and
``sections/energy.md.j2`` show it, or "not measured" with each source's reason
"""

from .capture import EnergyCapture
from .counters import AmdSmiEnergy, Counter, EnergyUnavailable, NvmlEnergy, RaplEnergy, default_sources

__all__ = ["EnergyCapture", "Counter", "EnergyUnavailable", "NvmlEnergy", "AmdSmiEnergy", "RaplEnergy",
           "default_sources"]
