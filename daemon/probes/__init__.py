"""Capability probes: one small module per probe, each defining ``PROBE``.

Adding a probe is adding one module with ``run(ctx) -> list[Unit]`` and
``PROBE = Probe(...)`` (plus its known defects in ``defects.toml``);
``PROBES`` is built from the modules here, in ``Probe.order``.
"""

from __future__ import annotations

from cardproof.registry import declared
from .base import VERDICTS, Probe, ProbeContext, Unit, summarise

#: modules of this package that are machinery, not probes
_NOT_PROBES = {"answers", "base", "capabilities", "defects", "looping", "sandbox"}

PROBES: dict[str, Probe] = declared(__name__, __path__, _NOT_PROBES, "PROBE", Probe)

__all__ = ["PROBES", "VERDICTS", "Probe", "ProbeContext", "Unit", "summarise"]
