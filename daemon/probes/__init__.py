"""Capability probes: one small module per probe, each defining ``PROBE``.

Adding a probe is adding one module with ``run(ctx) -> list[Unit]`` and
``PROBE = Probe(...)`` (plus its known defects in ``defects.toml``);
``PROBES`` is built from the modules here, in ``Probe.order``.

In short, ``probes/``: capability probes (tools, thinking, reasoning, coding,
vision) with declared-vs-delivered verdicts, each task with its own arm (``summarise`` gives every
graded task's verdict and arm beside the summary's, which is only the worst one's); an ERROR keeps
in ``detail_json`` the field and value behind it (``base.error_detail``:
``BackendError.where``/``.detail``, for a body that is no JSON, such as one cut off, where the
parser stopped, the last key before it and the tail). ``answers.py`` reads a reasoning answer as a
reader does (the ``ANSWER:`` line, else an answer declared in words and the result of its
arithmetic, else the last number attached to the asked unit that is not said of something else, else
the last number), tested against ``tests/fixtures/probe_answers.json``, real answers read by hand
with their provenance; whether a reply kept the asked form (``Probe.asked_format``) is recorded
(``format_followed``), never graded. Coding budgets are each task's reference solution in the
model's own tokenizer (``Backend.count_tokens``: llama-server's ``/tokenize``; from characters where
a server has none) times ``HEADROOM``, at least ``[probes] max_tokens``; ``looping.py`` names output
that repeats itself (a dict literal with a key again and again, the same line, a letter run on), arm
``looping``, so a loop is not blamed on the budget. The tools probe grades an answer with no call
that states what only the tool could say ``fabricated_result``. The counts ``defects.toml`` quotes
are placeholders each probe fills from its definition (``Probe.facts``, in the words of each
language's catalogue)
"""

from __future__ import annotations

from cardproof.registry import declared
from .base import VERDICTS, Probe, ProbeContext, Unit, summarise

#: modules of this package that are machinery, not probes
_NOT_PROBES = {"answers", "base", "capabilities", "defects", "looping", "sandbox"}

PROBES: dict[str, Probe] = declared(__name__, __path__, _NOT_PROBES, "PROBE", Probe)

__all__ = ["PROBES", "VERDICTS", "Probe", "ProbeContext", "Unit", "summarise"]
