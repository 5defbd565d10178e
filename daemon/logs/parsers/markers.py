"""Lines no parser here reads, but other code of logs/ does: they must pass the importer's one trigger scan.

Access lines go to ``logs/access.py`` (``parse_access``), the server's per-request timing blocks to
``logs/observed.py`` (``feed``).
"""

from __future__ import annotations

from .base import LineParsers

PARSER = LineParsers("markers", markers=(
    "[GIN]", "Request ", "log_server_r", "[llama-swap]",  # access lines: Ollama, llama-server, llama-swap
    "eval time", "print_timing",  # the timing block of one request
))
