"""What a run may state: the rules that keep it honest (``stable``) and the findings made under them.

``stable`` holds what every statement of the report obeys: unstable cells,
measurable differences, the headline. Every other module here but ``base``,
``inputs``, ``pick`` and ``show`` defines ``RULE``, a :class:`~.base.FindingRule` (its
``check(view) -> [Finding]``, its order); ``RULES`` lists them by
``order``. Adding a finding is adding its module and its test (a run where it
must fire and one where it must stay silent).

In short, ``findings/``: the article's Findings, after the headline: what the
numbers mean, one rule per module (``architecture``, ``ladder``, ``ranking``, ``context``,
``loads``, ``symptoms``, ``room``, ``kvcache``: the KV cache against the weights at the loaded
context, where a smaller file of one base model saves less measured memory than its file suggests;
``kvtype``: the KV cache a variant with another cache type saves, and the process or card memory
measured, beside its decode and prefill against the model per class; ``quality``), each ``RULE =
FindingRule(name, check, order, german)`` registered like the caveat rules. A ``Finding`` carries
its statement, the figures it rests on (``Fig``: a value, its kind and the anchor of its row:
``cell-``, ``step-``, ``sample-``, ``line-`` on the evidence page, ``fig-load-``, ``fit-`` in the
article), the condition that allowed it and the caveat that limits it, as message ids with values;
``show.py`` says it in a page's language (Babel numbers, every value escaped), and as plain text for
``cardproof publish``, which records each finding (``finding:<key>``) so a later change is an
addendum quoting both languages. ``stable.py`` holds what every statement of the report obeys
(unstable cells, ``measurable``: ranges apart and Welch's t-test at 5 %, the headline); no finding
comes from an unstable cell, an unfinished run or a difference ``measurable`` rejects. ``inputs.py``
reads what the rules need beyond the run view once per run (the models' GGUF shape, the depth steps'
samples and the context settings the log of their load states (flash attention, KV types, slots: the
context finding's caveat names them rather than calling one a change), fit, card memory, crashed
loads); the shape is read at registration from the file's header by ``daemon/modelfile.gguf_header``
(parameters, experts and experts used per token, active parameters, base name, a hash of the
tokenizer; m023); a model that ``llama-gguf-split`` cut into parts (``-00001-of-00003.gguf``,
registered by its first part as llama-server loads it) counts the tensors and bytes of every part,
and with a part missing states neither. A single llama-server's model gets it from the file its
``/props`` names (``model_path``) where that file is on this machine
(``LlamaServerBackend.describe_model``); a router lists each model's ``--model``. Ollama's models
get the same shape from their blob's header where Ollama runs on this machine, else from
``/api/show``'s ``model_info`` (parameters and expert counts; a mixture of experts' active
parameters and the tokenizer hash are not there and are not guessed, so no ladder is stated from
such models)
"""

from __future__ import annotations

from cardproof.registry import declared

from .stable import (BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, cell_values, cells_measurable,
                     every_sample_order, headline, interval_too_wide, is_unstable, judge_cell, measurable,
                     median_interval, reasoning_pairs, reasoning_took, report_limits, spread_ratio, unstable_ratio,
                     welch_differs)
from .base import Fig, Finding, FindingRule, Line, Quote, Term

#: modules of this package that are no rule
HELPERS = {"base", "stable", "inputs", "show", "pick"}

#: rule name -> rule (callable as its check), in article order
RULES: dict[str, FindingRule] = declared(__name__, __path__, HELPERS, "RULE", FindingRule)


def findings_for(view: dict) -> list[Finding]:
    """Every finding the run's data supports, in article order; none from a run that did not finish.

    ``view``: the run view with what ``inputs.gather`` adds. A rule that cannot judge a view (an older
    or damaged store lacks what it reads) states nothing rather than stopping the article.
    """
    if view["run"].get("status") != "completed":
        return []
    out: list[Finding] = []
    for rule in RULES.values():
        try:
            out.extend(rule(view))
        except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
            import sys

            print(f"run {view['run'].get('id')}: finding rule {rule.name} skipped: {exc!r}", file=sys.stderr)
    return out


__all__ = ["BOOTSTRAP_LEVEL", "BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "Fig", "Finding", "FindingRule", "Line",
           "Quote", "RULES", "Term", "cell_values", "cells_measurable", "every_sample_order", "findings_for",
           "headline", "interval_too_wide", "is_unstable", "judge_cell", "measurable", "median_interval",
           "reasoning_pairs", "reasoning_took", "report_limits", "spread_ratio", "unstable_ratio", "welch_differs"]
