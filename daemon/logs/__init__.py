"""Server logs as evidence: capture, attribution to loads, facts.

Integration points for the runner and the CLI:

* :func:`capture_file` / :func:`capture_journal` -- import new lines of a
  log file or a unit's journal (idempotent, resumes where it stopped);
* :func:`import_path` -- ``cardproof logs import``;
* :func:`attribute_run` -- link the loads found in the log to the runner's
  ``loads`` rows of a run;
* :func:`load_summaries` -- loads with their facts, line counts and the
  requests the server counted itself (``observed``, observed.py).

Where lines belong: processes.py (one server process's start and end in a
stream), attribution.py (router ports, PIDs, Ollama's runners), lines.py
(the container or collector prefix of a line, stripped once).
"""

from .importer import capture_file, capture_journal, import_path
from .linking import attribute_run
from .sources import LogSourceError
from .summary import load_summaries

__all__ = ["LogSourceError", "attribute_run", "capture_file", "capture_journal", "import_path", "load_summaries"]
