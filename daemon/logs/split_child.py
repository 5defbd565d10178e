"""Run journalctl and split its export output into records, in a process of its own.

Started by :class:`~.pipe.ChildAhead` as ``python -I -S split_child.py
journalctl ARGS...``. It reads only the standard library and the two
modules that split the export format (``export.py``, ``lines.py``, loaded
from this folder without the package, whose imports would cost more than
the split): start-up is a few milliseconds.

Why a process: splitting is Python work (about 4 µs per entry). On a
thread beside the importer it competed for Python's lock with the
importer's own parsing, so the two ran one after the other. In a process of
its own it runs on another core, and the importer only unpickles finished
batches (a fifth of a microsecond per record).

Output on stdout, one pickle per frame:

* ``("b", records)``: a batch of complete entries;
* ``("r", records)``: the same, holding entries refused as too long (see
  ``lines.Refusing``; its class is not pickled: this process loads
  ``lines.py`` under another module name);
* ``("end", rest, warnings, returncode, stderr, cpu_seconds)``: journalctl's
  unfinished tail, the split's warning counts, journalctl's exit status and
  its stderr (the last 4 KiB), and this process's CPU time.

A parent that stops reading (it closed the pipe, or terminated this
process) ends journalctl too.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter

_READ_BYTES = 1 << 20


def _splitter():
    """``export_entries`` and ``RealtimeFormatter`` from the files beside this one, without the package."""
    here = os.path.dirname(os.path.abspath(__file__))
    name = "_cardproof_split"
    pkg = types.ModuleType(name)
    pkg.__path__ = [here]  # "from .lines import ..." in export.py resolves here
    sys.modules[name] = pkg
    export = importlib.import_module(f"{name}.export")
    lines = importlib.import_module(f"{name}.lines")
    return export.export_entries, lines.RealtimeFormatter


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: split_child.py JOURNALCTL [ARGS...]", file=sys.stderr)
        return 2
    export_entries, formatter = _splitter()
    with tempfile.TemporaryFile() as err:  # a file: a chatty stderr cannot fill a pipe and stall journalctl
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)

        def stop(*_):
            proc.kill()
            os._exit(1)

        signal.signal(signal.SIGTERM, stop)
        out = sys.stdout.buffer
        fd = proc.stdout.fileno()
        fmt, warnings = formatter(), Counter()
        pending = b""
        fresh: list[bytes] = []  # read since the last split
        fresh_bytes = 0
        try:
            while True:
                data = os.read(fd, _READ_BYTES)
                if data:
                    fresh.append(data)
                    fresh_bytes += len(data)
                    # an entry longer than a read (a message of megabytes) is split again once as much
                    # again has come, not after every read: that cost its length squared (25 s for 32 MiB)
                    if fresh_bytes < len(pending):
                        continue
                elif not fresh:
                    break
                items, pending = export_entries(pending + b"".join(fresh), fmt, warnings)
                fresh, fresh_bytes = [], 0
                if type(items) is not list:  # refused entries among them: a plain list, its own tag
                    pickle.dump(("r", list(items)), out, protocol=pickle.HIGHEST_PROTOCOL)
                elif items:
                    pickle.dump(("b", items), out, protocol=pickle.HIGHEST_PROTOCOL)
                if not data:
                    break
            proc.wait()
            err.seek(0, os.SEEK_END)
            err.seek(max(0, err.tell() - 4096))
            text = err.read().decode("utf-8", "replace")
            pickle.dump(("end", pending, dict(warnings), proc.returncode, text, time.process_time()), out,
                        protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except BrokenPipeError:  # the parent stopped reading: nothing more is wanted
            proc.kill()
            proc.wait()
            os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
