"""The capture side's reading of its own stored rows, as the publish side borrows it.

report/ imports from daemon/ only the store and the campaign packages. What a run's rows mean is
read by code that lives beside the capture that wrote them (memory, logs, energy, the host, the
gates and probes a campaign names); the report reads it through the names here, so this list is
the whole of what the publish side knows of the capture side beyond the store and the campaign.
Each name is the capture side's own function or table, never a copy.
"""

from __future__ import annotations

from cardproof.daemon.energy.perf import cell_energy, idle_draw, unavailable
from cardproof.daemon.gates import GATES, default_config
from cardproof.daemon.host.load import foreign_cores
from cardproof.daemon.host.setup import KERNEL_FLAGS
from cardproof.daemon.logs.summary import crashed_loads, load_summaries
from cardproof.daemon.memory.attribution import load_window, not_measured_reason
from cardproof.daemon.memory.budget import budget, free_check_for_load
from cardproof.daemon.memory.host import load_summary
from cardproof.daemon.memory.readings import NOT_MEASURED, is_card_device
from cardproof.daemon.memory.reconcile import CATEGORY as MEMORY_FACTS, reconcile_load
from cardproof.daemon.probes import PROBES
from cardproof.daemon.probes.base import message, summarise
from cardproof.daemon.probes.defects import in_language, load_defects

__all__ = [
    "GATES", "KERNEL_FLAGS", "MEMORY_FACTS", "NOT_MEASURED", "PROBES", "budget", "cell_energy", "crashed_loads",
    "default_config", "foreign_cores", "free_check_for_load", "idle_draw", "in_language", "is_card_device",
    "load_defects", "load_summaries", "load_summary", "load_window", "message", "not_measured_reason",
    "reconcile_load", "summarise", "unavailable",
]
