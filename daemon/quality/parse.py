"""``llama-perplexity``'s own output lines read as figures: a pure function, tested on real output.

The figures are read from the summary the tool prints at its end
(``====== Perplexity statistics ======``, ``====== KL divergence statistics
======``, ``Same top p``), each with the id of the line it stands on, so the
article links every figure to the line that says it. What the tool's builds
print differently is read alike:

* newer builds put a time and level before their log lines
  (``0.03.858.681 I perplexity: ...``), not before the statistics;
* builds before late 2025 printed the 99th percentile twice, the second
  time under the 99 % label for what was the 90th (``99.0%   KLD`` twice):
  the first such line is the 99th percentile;
* the uncertainty sign is ``±`` (``+/-`` in the base run's final estimate).

Nothing is guessed: a figure the lines do not state is ``None``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable

_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)"
_PM = r"\s*(?:±|\+/-)\s*"

#: figure name -> (pattern, names of its groups): the first line that matches states the figure
PATTERNS: dict[str, tuple[re.Pattern, tuple[str, ...]]] = {
    "chunks": (re.compile(r"(?:computing over|calculating perplexity over) (\d+) chunks, n_ctx=(\d+)"),
               ("chunks", "n_ctx")),
    "ppl": (re.compile(r"Mean PPL\(Q\)\s*:\s*" + _NUM + _PM + _NUM), ("ppl", "ppl_err")),
    "ppl_base": (re.compile(r"Mean PPL\(base\)\s*:\s*" + _NUM + _PM + _NUM), ("ppl_base", "ppl_base_err")),
    "ppl_ratio": (re.compile(r"Mean PPL\(Q\)/PPL\(base\)\s*:\s*" + _NUM + _PM + _NUM),
                  ("ppl_ratio", "ppl_ratio_err")),
    "kld_mean": (re.compile(r"Mean\s+KLD:\s*" + _NUM + _PM + _NUM), ("kld_mean", "kld_mean_err")),
    "kld_max": (re.compile(r"Maximum KLD:\s*" + _NUM), ("kld_max",)),
    "kld_p99": (re.compile(r"(?<![\d.])99\.0%\s+KLD:\s*" + _NUM), ("kld_p99",)),
    "kld_median": (re.compile(r"Median\s+KLD:\s*" + _NUM), ("kld_median",)),
    "same_top": (re.compile(r"Same top p:\s*" + _NUM + _PM + _NUM + r"\s*%"), ("same_top", "same_top_err")),
    # the base run (--kl-divergence-base) prints perplexity as its final estimate, not the statistics
    "final": (re.compile(r"Final estimate: PPL = " + _NUM + _PM + _NUM), ("final_ppl", "final_ppl_err")),
    "too_short": (re.compile(r"you need at least (\d+) tokens to evaluate perplexity with a context of (\d+)"),
                  ("tokens_needed", "n_ctx_asked")),
    "text_tokens": (re.compile(r"tokenizes to only (\d+) tokens"), ("text_tokens",)),
}

#: the figures a --kl-divergence run must state for its row to count as measured
REQUIRED = ("kld_mean", "same_top", "ppl")


@dataclass
class Output:
    """What one llama-perplexity run printed: figure -> value, and figure -> the id of its line."""

    values: dict[str, float | int | None] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def get(self, name: str):
        return self.values.get(name)

    def missing(self, names: Iterable[str] = REQUIRED) -> list[str]:
        """The figures of ``names`` the output does not state."""
        return [n for n in names if self.values.get(n) is None]


def _value(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None  # a nan or inf printed is no figure


def parse_output(lines: Iterable[tuple[int, str]]) -> Output:
    """Figures of llama-perplexity's output, from ``(line_id, text)`` pairs in the order printed.

    A figure is taken from the first line that states it (so a build's repeated
    ``99.0%`` line, really its 90th percentile, is not read). Counts (``chunks``,
    ``n_ctx``, ``tokens_needed``, ``text_tokens``) are ints; the rest floats, ``None`` where printed as nan.
    """
    out = Output()
    for line_id, text in lines:
        for key, (pattern, names) in PATTERNS.items():
            if key in out.lines or key not in _hint(text):
                continue
            m = pattern.search(text)
            if m is None:
                continue
            out.lines[key] = line_id
            for name, raw in zip(names, m.groups()):
                out.values[name] = int(raw) if raw.isdigit() and name in _COUNTS else _value(raw)
                out.lines[name] = line_id
    return out


_COUNTS = frozenset({"chunks", "n_ctx", "tokens_needed", "n_ctx_asked", "text_tokens"})
_HINTS = {"chunks": "chunks", "ppl": "PPL(Q)", "ppl_base": "PPL(base)", "ppl_ratio": "PPL(Q)/PPL(base)",
          "kld_mean": "KLD", "kld_max": "KLD", "kld_p99": "KLD", "kld_median": "KLD", "same_top": "Same top p",
          "final": "Final estimate", "too_short": "you need at least",
          "text_tokens": "tokenizes to only"}


def _hint(text: str) -> set[str]:
    """The figures a line may hold, by a substring each needs: one cheap test before the patterns."""
    return {k for k, h in _HINTS.items() if h in text}
