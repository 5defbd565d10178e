"""Facts from a server command line written into the log.

Command lines reach the log as one line (a unit's ``ExecStart`` echoed, Ollama's
``starting llama server cmd="..."``) or, in llama-server router mode, as one
argument per line; the attribution step joins a flag with its value line
and calls :func:`flag_facts` for the pair.
"""

from __future__ import annotations

import re

from .base import Fact, LineParsers

PARSER = LineParsers("cmdline")

# flag -> (fact, kind); long and short spellings of llama-server's options
_FLAGS: dict[str, tuple[str, str]] = {
    "--spec-type": ("spec_type", "text"),
    "--spec-draft-n-max": ("spec_draft_n_max", "num"),
    "--draft-max": ("spec_draft_n_max", "num"),
    "--draft": ("spec_draft_n_max", "num"),
    "--model-draft": ("draft_model", "text"),
    "-md": ("draft_model", "text"),
    "--ctx-size": ("ctx_size", "num"),
    "-c": ("ctx_size", "num"),
    "--cache-type-k": ("kv_cache_type_k", "text"),
    "-ctk": ("kv_cache_type_k", "text"),
    "--cache-type-v": ("kv_cache_type_v", "text"),
    "-ctv": ("kv_cache_type_v", "text"),
    "--parallel": ("slots", "num"),
    "-np": ("slots", "num"),
}
_UNITS = {"spec_draft_n_max": "tokens", "ctx_size": "tokens", "slots": "slots"}
_FLAG_VALUE = re.compile(r"(?:^|\s)(--?[a-z][a-z-]*)[ =]([^\s\"']+)")


def flag_facts(flag: str, value: str) -> list[Fact]:
    """The fact a ``flag value`` pair states, or ``[]`` for flags we do not read."""
    spec = _FLAGS.get(flag)
    if spec is None:
        return []
    name, kind = spec
    if kind == "num":
        try:
            return [Fact(name, float(int(value)), unit=_UNITS.get(name))]
        except ValueError:
            return []
    return [Fact(name, value_text=value)]


@PARSER.on("--spec-", "--ctx-size", "--model-draft", "--cache-type-", "--draft", "-md ", "-ctk ", "-ctv ", "-c ",
        "--parallel", "-np ")
def parse_command_line(text: str) -> list[Fact]:
    """Flags and values from a one-line command line."""
    facts = []
    for m in _FLAG_VALUE.finditer(text):
        facts.extend(flag_facts(m[1], m[2]))
    return facts
