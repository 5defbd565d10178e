"""Where one single-model llama-server process begins and ends in a stream of lines.

A stream is one writer: a PID from the journal, a compose service, or a
plain file written by one process at a time (a ``--log-file`` of a server
that was restarted, ``docker logs`` of one container, a paste).

* **Start** -- the first words a llama.cpp server binary prints, by era:
  ``main: build = `` (2024), ``INFO [ main] build info`` (2024 and
  ik_llama.cpp), its JSON form, ``build: N (sha)`` / ``system info:`` (2025),
  ``log_info:`` / ``device_info:`` / ``build_info:`` (2026), and a router
  child's ``llama_server: initializing``. ``main: server is listening`` and
  ``HTTP server listening`` are *not* starts: depending on the build they
  come before or after the model loaded, in the same process. Lines a binary
  prints before its logger starts (``ggml_cuda_init``, ``  Device 0:``,
  ``load_backend``, ``register_backend``, ``warning:``, a download's
  ``common_download...`` / ``curl_perform_with_retry``, late 2025's ``main:
  setting n_parallel = 4 and kv_unified = true``, 2026's ``main: n_parallel
  is set to auto``, a debug build's ``register_device``, SYCL's device table
  with its headers, a timestamp before any of them) belong to the process
  that starts right after them: a process starts at its first line, not at
  ``build:``. A held line's continuation (a table row, an indented detail)
  is held with it; any other line (a wrapper's banner) lets them go.
* **Model** -- ``loading model '...'`` or, in builds and forks that print no
  such line, ``llama_model_loader: loaded meta data ... from PATH``. Lines of
  a process are held until it names its model, then join that load.
* **End** -- ``cleaning up before exit`` / ``exiting due to``, or the next
  start. A process killed without a word (kill -9, the OOM killer, a
  container restarted) ends where the next one's device discovery begins: a
  server whose model loaded never looks for devices or backends again, so
  those lines open the next process, not the dead one's tail. The process's own last words (a memory breakdown, the exit reason)
  follow the end line; in a plain file they belong to it until a line that is
  not llama.cpp output (a wrapper script's banner) or the next start. Its
  words that have no llama.cpp shape (``Received second interrupt``, printed
  by the signal handler on a second Ctrl-C; the C++ runtime's ``terminate
  called ...`` and ``  what():``) are its own all the same. A CUDA
  error or failed assert marks the load crashed; its backtrace still follows.
  A server still running at the end of the log keeps an open load.

Lines a proxy writes into the same stream (llama-swap's ``[INFO]``,
``[llama-swap]``) are never a server's.
"""

from __future__ import annotations

import re
from cardproof.marks import N_

_LLAMA_TS = r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d [A-Z] )?"
_START = re.compile(
    _LLAMA_TS + r"(?:build: \d|build_info: |main: build = |system info: |system_info: |log_info: |device_info:"
    r"|cmn +common_param: common_params_print_info|(?:srv +)?llama_server: initializing"
    r"|INFO \[ *w?main\] (?:build|system) info"
    r"|\{.*\"(?:msg|message)\": ?\"(?:build|system) info\")")
# What a server binary prints while it parses its arguments, before its logger prints build:
# loading backends and finding devices, a download (-hf), warnings about arguments, and the server's
# own choice of --parallel (late 2025: "main: setting n_parallel = 4 and kv_unified = true (add -kvu
# to disable this)"; 2026, settled while parsing: "main: n_parallel is set to auto"). One shape
# missing here is enough to cut the device lines off their process (llama.cpp b7342 in docker: the
# n_parallel line between load_backend and build: left 8 lines in no load).
_SETS_PARALLEL = r"(?:srv +)?main: (?:n_parallel is set|setting n_parallel)"
# SYCL's device table, printed as the backend registers (before build: since 2025): its headers, in
# either order by build, then rows that are indented or begin with "|" (_CONTINUATION)
_SYCL_TABLE = r"Running with Environment Variables:|Build with Macros:|Found \d+ SYCL devices:|SYCL Optimization Feature:"
_PREAMBLE = re.compile(_LLAMA_TS + r"(?:ggml_\w+: |load_backend: |register_backend: |register_device: | {1,2}Device \d+: "
                       r"|warning: |warn: |WARNING: |DEPRECATED: |common_download|curl_perform_with_retry: "
                       r"|no remote preset|using config file: |Vulkan\d+: |Log start$|" + _SETS_PARALLEL
                       + "|" + _SYCL_TABLE + ")")
# a line that continues the held line before it (a device table's rows, an indented detail)
_CONTINUATION = re.compile(r"[ \t|]")
# Words a process prints only before its model is loaded: device discovery, backend loading, a download,
# the server's own --parallel choice. After its model loaded (or its exit) they are the next process's
# first words -- in a docker log of a container killed without a last word (the OOM killer, kill -9)
# and restarted, nothing else says where the first process ended.
_FIRST_WORDS = (r"ggml_cuda_init: |ggml_vulkan: Found \d+ Vulkan devices|ggml_metal_device_init: "
                r"|ggml_metal_library_init: |load_backend: |register_backend: |register_device: | {1,2}Device \d+: "
                r"|common_download|curl_perform_with_retry: |Log start$|" + _SETS_PARALLEL + "|" + _SYCL_TABLE)
_NEXT_FIRST = re.compile(_LLAMA_TS + "(?:" + _FIRST_WORDS + ")")
# of those, and the warnings about arguments, the ones a process never prints after its exit line
# (ggml_metal_free, for one, it does)
_NEXT_PREAMBLE = re.compile(_LLAMA_TS + r"(?:warning: |warn: |WARNING: |DEPRECATED: |" + _FIRST_WORDS + ")")
# a process's last words without llama.cpp's line shape: the signal handler on a second interrupt,
# the C++ runtime aborting (an exception thrown while cleaning up)
_OWN_LAST_WORDS = ("Received second interrupt", "terminate called after throwing", "  what():  ")
_LOADING_MODEL = re.compile(r"loading model '([^']+)'")
_META_MODEL = re.compile(r"llama_model_loader: loaded meta data with \d+ key-value pairs and \d+ tensors from (.+?)"
                         r" \(version ")
_CRASH = re.compile(r"(?:\.cu:\d+: ((?:CUDA|ROCm|HIP|MUSA) error)|(GGML_ASSERT\(.{0,1000}?\) failed))")
# llama.cpp's own line shapes: its timestamp, "function: ", its 2024 INFO and JSON forms
_LLAMA_LIKE = re.compile(r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d [A-Z] |[a-z_][a-z0-9_]*: |INFO \[|VERB \[|\{\")")
_PROXY = ("[INFO] ", "[DEBUG] ", "[WARN] ", "[ERROR] ", "[llama-swap] ", "llama-swap listening")
_MAX_PENDING = 20000


def has_phase_word(text: str) -> bool:
    """Whether a load's line may change its phase (draft model, KV cache, ready)."""
    # an "or" chain, not any() over a tuple: this runs for every line of a load
    return ("draft" in text or "model loaded" in text or "initializing" in text or "KV cache" in text
            or "kv_cache: size" in text)


def file_name(path: str) -> str:
    """The last part of a model path as the server printed it: a Windows path (``C:\\Users\\x\\m.gguf``)
    splits at backslashes too, whatever system reads the log."""
    tail = re.split(r"[\\/]", path.rstrip("/\\"))[-1]
    return tail or path


def is_start(text: str) -> bool:
    """Whether ``text`` is one of a server binary's first lines."""
    return _START.match(text) is not None  # anchored: most lines fail at their first characters


def named_model(text: str) -> str | None:
    """The model file a line names as the one being loaded, or None."""
    if "loading model '" in text:
        m = _LOADING_MODEL.search(text)
        if m:
            return m[1]
    if "loaded meta data" in text:
        m = _META_MODEL.search(text)
        if m:
            return m[1]
    return None


class Streams:
    """Single-model server processes, per stream; see the module docstring.

    ``owner`` is the Attributor: its ``hooks`` create and update loads and
    bind held lines, ``unplaced`` counts lines no load can claim and why,
    ``phase`` follows the draft model and readiness of a load.
    """

    def __init__(self, owner, state: dict | None):
        self.owner = owner
        self.procs: dict[str, dict] = {}
        self.last_unplaced: tuple[int, str] | None = None  # (line id, reason) of the last line left out
        for k, v in (state or {}).items():
            # a source last read by an older cardproof stored only load, pending and ended
            p = {"load": None, "pending": [], "pre": [], "started": False, "ended": False} | dict(v)
            p["started"] = p["started"] or p["load"] is not None or bool(p["pending"])
            self.procs[k] = p

    def line(self, key: str, pid: int | None, line_id: int, text: str, ts: str | None):
        proc = self.procs.get(key)
        if proc is None:
            proc = self.procs[key] = {"load": None, "pending": [], "pre": [], "started": False, "ended": False}
        if proc.get("mixed"):
            return self._unplaced("several_servers")
        if text.startswith(_PROXY):
            proc["pre"] = []
            return self._unplaced("proxy")
        how = "pid" if pid is not None else "boundary"
        if is_start(text):
            if not self._start(proc, key, pid):
                return self._unplaced("several_servers")
            proc = self.procs[key]
        elif not proc["started"]:
            return self._outside(proc, key, pid, line_id, text, ts, how)
        elif pid is None and proc.get("ready") and not proc["ended"] and _NEXT_FIRST.match(text):
            # device discovery after the model loaded: the next process's first words, this one died
            # without a last word (killed, its container restarted); the next start ends its load
            proc["tail_closed"] = True
            return self._outside(proc, key, pid, line_id, text, ts, how)
        elif (proc["ended"] or proc.get("crashed") or proc.get("tail_closed")) and (
                proc.get("tail_closed") or _NEXT_PREAMBLE.match(text)
                or (proc["ended"] and pid is None and _LLAMA_LIKE.match(text) is None
                    and not text.startswith(_OWN_LAST_WORDS))):
            # after the exit or crash: a wrapper's banner, or the next binary's first words -- the
            # process has said its last word (a crash's backtrace is no llama.cpp line, yet still its own)
            proc["tail_closed"] = True
            return self._outside(proc, key, pid, line_id, text, ts, how)
        return self._inside(proc, pid, line_id, text, ts, how)

    # -- lines between processes ------------------------------------------
    def _outside(self, proc, key, pid, line_id, text, ts, how):
        path = named_model(text)
        if path is not None:  # a log that begins after the start lines: the model line opens the load
            self._start(proc, key, pid)
            return self._inside(self.procs[key], pid, line_id, text, ts, how)
        if _PREAMBLE.match(text) or (proc["pre"] and _CONTINUATION.match(text)):
            if len(proc["pre"]) < _MAX_PENDING:
                proc["pre"].append(line_id)
            return None, "unattributed", None
        self._release_pre(proc)
        self.last_unplaced = (line_id, "no_server")
        return self._unplaced("no_server")

    def _start(self, proc, key, pid) -> bool:
        """A new process begins on this stream; False when the stream cannot be one process's."""
        if proc["started"] and not proc["ended"] and proc["load"] is None:
            return True  # a second start word of the same starting process (build, then system_info)
        if proc["started"] and pid is not None:
            # one PID cannot start twice: a proxy (llama-swap) writes for several servers under its own
            # PID, and nothing in it can be proven from here on
            proc["mixed"] = True
            self._release(proc["pending"] + proc["pre"], "several_servers")
            return False
        if proc["load"] is not None and not proc["ended"] and not proc.get("crashed"):
            self.owner.hooks.update_load(proc["load"], end_reason=N_("next process started"))
        self._release(proc["pending"], "no_model")
        self.procs[key] = {"load": None, "pending": list(proc["pre"]), "pre": [], "started": True, "ended": False}
        return True

    # -- lines of one process ---------------------------------------------
    def _inside(self, proc, pid, line_id, text, ts, how):
        hooks = self.owner.hooks
        load = proc["load"]
        path = named_model(text)
        if path is not None and load is not None and "loading model '" in text:
            # a second model in what looked like one process (a proxy writing for several servers
            # into one stream): from here on nothing in it can be proven
            proc["mixed"] = True
            return self._unplaced("several_servers")
        if load is None:
            if path is None:
                if len(proc["pending"]) < _MAX_PENDING:
                    proc["pending"].append(line_id)
                return None, "unattributed", None
            load = hooks.new_load(model_name=file_name(path), model_file=path, pid=pid,
                                  start_line_id=line_id, requested_at=ts)
            proc["load"] = load
            hooks.bind(proc["pending"], load, how)
            proc["pending"] = []
        if "failed to load model" in text and not proc.get("why"):
            proc["why"] = N_("exit after the model failed to load")
            hooks.update_load(load, status="failed", end_reason=N_("model failed to load"))
        if "exit" in text and ("cleaning up before exit" in text or "exiting due to" in text) \
                or "Received second interrupt" in text:
            hooks.update_load(load, end_line_id=line_id, ended_at=ts, end_reason=proc.get("why") or N_("process exit"))
            proc["ended"] = True
        elif "failed" in text or ".cu:" in text:
            m = _CRASH.search(text)
            if m and not proc.get("crashed"):
                proc["crashed"] = True  # its backtrace still follows, until the next start
                # a crash before the model was ready is a load that failed, not a loaded model that died
                failed = {} if proc.get("ready") else {"status": "failed"}
                hooks.update_load(load, end_line_id=line_id, ended_at=ts, end_reason=f"crashed: {m[1] or m[2]}",
                                  **failed)
        if "model loaded" in text:
            proc["ready"] = True
        if has_phase_word(text):
            self.owner._phase(load, line_id, text, ts)
        return load, how, None

    # -- what could not be placed -------------------------------------------
    def _unplaced(self, reason: str):
        self.owner.unplaced[reason] += 1
        return None, "unattributed", None

    def _release_pre(self, proc) -> None:
        self._release(proc["pre"], "no_server")
        proc["pre"] = []

    def _release(self, line_ids: list, reason: str) -> None:
        if line_ids:
            self.owner.unplaced[reason] += len(line_ids)

    def crashed(self, load) -> None:
        """A line of ``load``'s process said it died by a signal (its shell's or supervisor's words)."""
        for p in self.procs.values():
            if p.get("load") == load:
                p["crashed"] = True  # a next start must not call it "next process started"

    def claimed(self, line_id: int) -> bool:
        """A line left out as no server's was claimed after all (a kernel line naming a process's PID);
        False when it was not left out (a line held for a process still starting stays held)."""
        if self.last_unplaced is None or self.last_unplaced[0] != line_id:
            return False
        self.owner.unplaced[self.last_unplaced[1]] -= 1
        self.last_unplaced = None
        return True

    def held(self) -> int:
        """Lines still waiting for their process to start or to name its model."""
        return sum(len(p["pending"]) + len(p["pre"]) for p in self.procs.values())

    def redirect(self, f) -> None:
        for p in self.procs.values():
            if p.get("load") is not None:
                p["load"] = f(p["load"])

    def state(self) -> dict:
        return self.procs
