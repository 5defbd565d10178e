"""One rounding per quantity: a figure reads the same wherever a page prints it.

A page that shows a prefill median as "257" in its table and "257.2" in a rule's
outcome makes a reader wonder which was measured. Every article figure of a
measured quantity is printed through :func:`digits` (templates call
``L.fig(kind, value)``), so the table, the findings, the rules and the
expectations round it alike; ``tests/test_figures_rounding.py`` fails when a
template prints one of these quantities with ``L.num`` instead. The evidence
page prints raw samples with more digits on purpose: it is the row behind the
figure, and the figure is that row rounded as below.

In short, ``figures.py``: One rounding per measured quantity (decode 1 place,
prefill and TTFT 0, ITL 2, …): templates print them with ``L.fig(kind, value)``, rule and
expectation values with ``L.rule_value`` (more places only where the rounding would equal the
threshold the rule compares with); ``tests/test_figures_rounding.py`` fails on a template that
prints one with ``L.num`` and on a page that prints a stored median two ways
"""

from __future__ import annotations

import re

# Decimal places per quantity. Rates of a few tokens per second need the tenth (CPU decode
# is 2–30 tok/s); prefill and times in milliseconds run to hundreds or thousands, where a tenth
# is noise. Inter-token latency is a few milliseconds, so it keeps two places.
DIGITS: dict[str, int] = {
    "decode": 1,        # tok/s per request, from the server's counters
    "prefill": 0,       # tok/s reading the prompt
    "output": 1,        # tok/s summed over the streams of a load step
    "ttft": 0,          # ms to the first token
    "e2e": 0,           # ms per request, end to end
    "queue": 0,         # ms waiting for a slot
    "itl": 2,           # ms between streamed chunks
    "rps": 2,           # requests per second
    "load_seconds": 2,  # s until the server said the model was ready
    "mib": 0,           # MiB of memory or of a file
    "count": 0,         # tokens, layers, probes passed
}

# What a rule or an expectation reads (daemon/campaign/rules/schema.py names), by its leading word.
_RULE_HEADS = {
    "decode": "decode", "prefill": "prefill", "ttft_ms": "ttft", "load_seconds": "load_seconds",
    "card_mib": "mib", "ctx_size": "count", "offloaded_layers": "count", "total_layers": "count",
    "n_threads": "count", "n_threads_batch": "count", "n_batch": "count", "n_ubatch": "count",
    "spec_draft_n_max": "count",
}


def rule_kind(name: str) -> str | None:
    """The quantity a rule's value name reads, or None where it has no fixed rounding.

    ``incumbent.decode.short`` and ``variant.kv8.prefill.long`` read the same quantity as
    ``decode.short`` and ``prefill.long``; ``probe.coding.passed`` is a count.
    """
    parts = name.split(".")
    if parts[0] == "incumbent":
        parts = parts[1:]
    elif parts[0] == "variant" and len(parts) > 2:
        parts = parts[2:]
    if not parts:
        return None
    if parts[0] == "probe" and parts[-1] in ("passed", "total"):
        return "count"
    if parts[0].endswith("_mib"):
        return "mib"
    return _RULE_HEADS.get(parts[0])


def rule_digits(name: str, value: float, text: str = "") -> int:
    """Decimal places for ``value`` read by a rule named ``name`` in ``text``.

    The quantity's own rounding, unless that rounding would make the value equal to a number
    the rule compares it with while the value itself is not (prefill 499.6 shown as "500"
    against ``>= 500``): then as many more places as tell them apart, at most three more.
    """
    kind = rule_kind(name)
    base = DIGITS[kind] if kind else 2
    literals = {float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text)}
    digits = base
    while digits < base + 3 and any(round(value, digits) == x != value for x in literals):
        digits += 1
    return digits
