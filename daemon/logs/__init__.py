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

In short, ``logs/``: log sources (file, journal), collector prefixes stripped once
(``lines.py``), process boundaries (``processes.py``), attribution of each line to one load
(``attribution.py``), fact parsers per server (``parsers/``), observed requests from the server's
own counters (draft acceptance included; ``observed.py`` calls a request cardproof's own where its
counters are those of any sample of the load's run, whatever load it names, of a probe's answer (the
``timings`` in its stored exchange), or the foreign_load canary's second client, printed right after
the canary's sample: only the rest is foreign), the import pipeline (``importer.py``): a whole
journal's export output (a journal file, a unit's first read) is read and split by a process of its
own (``split_child.py``, started by ``pipe.ChildAhead`` as ``python -I -S``, loading only
``export.py`` and ``lines.py``): it runs on another core instead of taking turns at Python's lock
with the importer, which only unpickles finished batches; journalctl's exit status and stderr come
back in its last frame, and a splitting process that dies fails the import. A read resumed at its
cursor (the daemon's capture every 2 s: a few lines, where the process's start-up would cost more)
and ``-o json`` output are split on a thread (``pipe.PipeAhead``; the importer opens
``reader.io_window`` while it waits on SQLite without Python's lock). The export format is split
looking up only the fields a record needs (``export.py``); every ``journalctl -o short*`` text
format is stripped when a journal is pasted. A file capture reads up to the size the file had when
it began (``FileReader(until=)``): a writer faster than the reader never keeps one capture going. A
line is stored whole up to ``lines.MAX_LINE_BYTES``, 32 MiB (its bytes without ``\\n`` or ``\\r\\n``; a
journal entry's MESSAGE; a ``-o json`` export file's whole line); a longer one is refused: not
stored, counted (``too_long``), named in the import's summary by byte offset (journal: cursor) and
length, and kept as a capture gap (``Reader.refuse``). It is skipped while read, counted to its
newline and never held: a newline-free blob of any size costs the limit and a 4 MiB chunk. A file's
resume offset is the byte after the last complete line stored or refused; a line without its newline
at the end of a read that is not final (the daemon's captures) is read again from its first byte by
the next one. A journal's cursor moves past a refused entry too (``lines.Refusing`` batches), so it
is refused once. The importer stores its buffer every 20,000 lines or 64 M characters, whichever
comes first; the journal's splitters split an unfinished entry again only once as much again has
come (after every 1 MiB read, a long message cost its length squared). An import raises SQLite's
page cache to 64 MiB (``IMPORT_CACHE_KIB``) and gives it back. A process starts at its first line,
not at ``build:``: what a binary prints before its logger (device discovery, backend loading,
downloads, warnings, the server's own ``--parallel`` choice) and its last words after the exit line
(``Received second interrupt``) are its load's, in plain, docker, compose and journald logs alike;
device discovery after a load's model loaded (a process killed without a word, its container
restarted) opens the next process (``processes.py``, ``tests/test_logs_process_lines.py``). Where no
``llama_context: n_ctx`` line is printed, ``context.py`` states the load's ``ctx_size`` from its
slots when they prove it (one slot, or ``kv_unified`` in the log; not when capped to the training
context). The draft model is read in its three forms (``loading draft model '…'``, ``|model="…"``,
the JSON log's ``"model"``); a load that crashes before ``model loaded`` is stored as failed. A
device error is ``CUDA error: …`` or the same line of ggml's CUDA code built for AMD or Moore
Threads (``ROCm error: …``, ``HIP error: …``, ``MUSA error: …``, stored with its platform named);
``ggml-cuda.cu:NN: ROCm error`` ends its load as ``crashed: ROCm error``
"""

from .importer import capture_file, capture_journal, import_path
from .linking import attribute_run
from .sources import LogSourceError
from .summary import load_summaries

__all__ = ["LogSourceError", "attribute_run", "capture_file", "capture_journal", "import_path", "load_summaries"]
