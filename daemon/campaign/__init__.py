"""The campaign layer: what a run is asked to measure, read once and frozen.

The campaign file's schema (``tables``, ``schema``, ``validate``, ``check``), the settings of every
axis (``load``, ``arrivals``, ``fit``, ``variants``, ``variant_args``, ``quality``, ``order``), its
pre-registration (``registration``), the pass-rule engine (``rules``) and what a run's stored evidence
means under its campaign (``slo``, ``variant_evidence``). It sits above the libraries (store, server,
host, backends, logs, memory, gates, probes, quality, energy) and below the run.
"""
