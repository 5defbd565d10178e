"""The run layer: one campaign measured, from its start to its verdicts.

Bottom first: a run's record and context (``record``, ``context``, ``loads``); the steps the
participants call (``load/``, ``variants/``, ``probes``, ``quality``, ``canaries``, ``sampling``,
``cellchecks``, ``embedding``); the participants; the runner, whose phases call them; ``judge`` and
``gate_counts`` after the cells. Only the service sits above it.
"""
