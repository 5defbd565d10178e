"""Which model load a log line belongs to: by process identity, never by time.

A line is attributed only on evidence the log itself gives, never guessed from
timing or order alone. Rules, in the order they are tried:

* **port** -- a llama-server router prefixes each child's lines with
  ``[port]``; the port is bound to a load by the router's line
  ``spawning server instance with name=X on port P`` and stays bound until
  another spawn reuses it. The router's ``proxying request ... on port P``
  lines go to the same load.
* **boundary** -- the router's own lines about one instance (spawn, its
  argument listing, ``stopping``/``exited`` by name); in a stream written by
  one process at a time (a ``--log-file`` of a restarted single-model
  server, ``docker logs``, a paste) the lines of one process, from its start
  lines to its exit (processes.py says how both are recognised); in Ollama's
  log the lines between ``starting llama server`` and the next start, but
  only while ``loaded runners count=1`` says no other runner is there.
* **pid** -- a journal line's ``_PID`` when that process is a single-model
  server (one process, one load). A PID whose stream shows a second server
  starting (a proxy such as llama-swap writing for several) is not one
  process: from that line on, nothing in it is attributed.

Everything else is **unattributed**: router start-up lines, lines of a
child whose spawn line was never captured, Ollama lines while two runners
are loaded, lines of a log that begins after its server started. A guess
would be worse than a gap. ``unplaced`` counts them by reason, for the one
summary line an import prints.

The state is a plain dict so that an import can stop and the next one
resume with the same bindings (it is stored with the log source).
"""

from __future__ import annotations

import re
from collections import Counter

from cardproof.daemon.store.crashes import router_died
from .parsers import Fact
from .parsers.cmdline import flag_facts
from .processes import Streams, file_name, has_phase_word

_SPAWN = re.compile(r"spawning server instance with name=(\S+) on port (\d+)")
_PROXY = re.compile(r"proxying request to model (\S+) on port (\d+)")
_BY_NAME = re.compile(r"(?:stopping model instance|removing LRU) name=(\S+)")
_EXITED = re.compile(r"instance name=(\S+) exited with status (-?\d+)")
_ARG = re.compile(r"\bload:   (\S.*)$")
_OLLAMA_STARTS = ('msg="starting llama server"', 'msg="starting runner"', 'msg="starting llama-server"')
_OLLAMA_MODEL = re.compile(r"--model (\S+?)\"?(?:\s|$)")
_OLLAMA_PORT = re.compile(r"--port (\d+)")
# the scheduler's plan for the next runner, printed before it starts
_OLLAMA_PLAN = ("msg=offload", 'msg="offload', "source=memory.go", 'msg="system memory"',
                'msg="using llama-server for model"')
_OLLAMA_READY = re.compile(r"(?:llama runner|llama-server) started in [\d.]+ seconds")
_OLLAMA_COUNT = re.compile(r'msg="loaded runners" count=(\d+)')

#: Facts that describe the draft model when printed during its load.
DRAFT_SCOPED = frozenset(
    {"model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib", "output_buffer_mib", "rs_buffer_mib",
     "ctx_size", "seq_ctx_size", "kv_unified", "kv_cache_type_k", "kv_cache_type_v", "offloaded_layers",
     "total_layers", "n_batch", "n_ubatch", "flash_attn"}
)
_MAX_PENDING = 20000


class Attributor:
    """Feed lines in log order; get ``(load_id, attribution, extra_facts)`` back.

    ``hooks`` is the importer: ``new_load(**cols) -> id``,
    ``update_load(id, **cols)``, ``bind(line_ids, load_id, attribution)``,
    ``crashed(id, line_id, ts, end_reason, exit_status)``.
    """

    def __init__(self, state: dict | None, hooks):
        s = state or {}
        self.hooks = hooks
        self.ports: dict[int, int] = {int(k): v for k, v in s.get("ports", {}).items()}
        self.names: dict[str, int] = dict(s.get("names", {}))
        self.routers: set[str] = set(s.get("routers", []))
        self.ollama_keys: set[str] = set(s.get("ollama_keys", []))
        self.streams = Streams(self, s.get("procs"))
        self.ollama: dict[str, dict] = {k: dict(v) for k, v in s.get("ollama", {}).items()}
        self.args: dict | None = s.get("args")
        self.draft: set[int] = set(s.get("draft", []))
        self.swa: set[int] = set(s.get("swa", []))  # loads whose SWA KV cache is being created
        # router children whose exit is no crash: the router asked them to stop, or they said why they go
        self.expected_exit: set[int] = set(s.get("expected_exit", []))
        self.unplaced: Counter = Counter()  # this import's lines no load can claim, by reason

    def state(self) -> dict:
        """A JSON-able snapshot to resume from."""
        return {
            "ports": {str(k): v for k, v in self.ports.items()},
            "names": self.names,
            "routers": sorted(self.routers),
            "ollama_keys": sorted(self.ollama_keys),
            "procs": self.streams.state(),
            "ollama": self.ollama,
            "args": self.args,
            "draft": sorted(self.draft),
            "swa": sorted(self.swa),
            "expected_exit": sorted(self.expected_exit),
        }

    def redirect(self, mapping: dict[int, int]) -> None:
        """Loads merged into the runner's rows: follow them to their new ids."""
        if not mapping:
            return
        f = lambda v: mapping.get(v, v)  # noqa: E731
        self.ports = {k: f(v) for k, v in self.ports.items()}
        self.names = {k: f(v) for k, v in self.names.items()}
        self.streams.redirect(f)
        for p in self.ollama.values():
            if p.get("load") is not None:
                p["load"] = f(p["load"])
        if self.args:
            self.args["load"] = f(self.args["load"])
        self.draft = {f(v) for v in self.draft}
        self.swa = {f(v) for v in self.swa}
        self.expected_exit = {f(v) for v in self.expected_exit}

    # -- the one entry point ------------------------------------------------
    def feed(self, line_id: int, pid: int | None, port: int | None, text: str, ts: str | None,
             stream: str | None = None):
        """``(load_id, attribution, extra_facts)`` for one clean line.

        ``stream`` names the writer where a prefix gave no PID (a compose
        service, journald's ``kernel``); without either the file is one stream.
        """
        if port is not None:
            load = self.ports.get(port)
            if load is None:
                self.routers.add(str(pid) if pid is not None else (stream or "-"))
                self.unplaced["unknown_port"] += 1
                return None, "unattributed", None
            if has_phase_word(text):
                self._phase(load, line_id, text, ts)
            elif "exiting due to" in text:  # the child's own last words (a failed load): its exit is no crash
                self.expected_exit.add(load)
            return load, "port", None
        key = str(pid) if pid is not None else (stream or "-")
        if key in self.routers:
            return self._router_line(key, line_id, text, ts)
        if key in self.ollama_keys or "source=" in text and ("level=" in text) and "msg=" in text:
            self.ollama_keys.add(key)
            return self._ollama_line(key, line_id, text, ts)
        if "router mode" in text or "spawning server instance" in text:
            self.routers.add(key)
            held = self.streams.procs.pop(key, None)  # lines held for a single-model process stay unattributed
            if held:
                self.unplaced["router"] += len(held["pending"]) + len(held["pre"])
            return self._router_line(key, line_id, text, ts)
        return self.streams.line(key, pid, line_id, text, ts)

    def load_of_pid(self, pid: int | None) -> int | None:
        """The load of the process with ``pid``, which a kernel line names: its stream's load, else the
        latest load of this source that carries the PID (a router's child, an Ollama runner)."""
        if pid is None:
            return None
        proc = self.streams.procs.get(str(pid))
        if proc is not None and proc.get("load") is not None:
            return proc["load"]
        finder = getattr(self.hooks, "load_of_pid", None)
        return finder(pid) if finder is not None else None

    def only_open_load(self) -> int | None:
        """The one server process still running in this source, or None where there are several (or a
        router's or Ollama's children): systemd's "Main process exited" is about a unit's main process."""
        if self.routers or self.ollama_keys:
            return None
        running = [p["load"] for p in self.streams.procs.values() if p.get("load") is not None
                   and not p["ended"] and not p.get("crashed") and not p.get("mixed")]
        return running[0] if len(running) == 1 else None

    def held(self) -> int:
        """Lines still waiting for a start or a model name (a later import may place them)."""
        return self.streams.held()

    # -- llama-server router ----------------------------------------------
    def _router_line(self, key, line_id, text, ts):
        if "load:" in text:
            m = _SPAWN.search(text)
            if m:
                name, port = m[1], int(m[2])
                load = self.hooks.new_load(model_name=name, port=port, start_line_id=line_id, requested_at=ts)
                self.ports[port] = load
                self.names[name] = load
                self.args = {"load": load, "flag": None}
                return load, "boundary", None
            if self.args is not None:
                if "spawning server instance with args" in text:
                    return self.args["load"], "boundary", None
                a = _ARG.search(text)
                if a:
                    return self._arg(a[1].strip())
        self.args = None
        if "proxying request" in text:
            m = _PROXY.search(text)
            load = self.ports.get(int(m[2])) if m else None
            if load is None:
                self.unplaced["router"] += 1
            return load, ("port" if load else "unattributed"), None
        if "name=" in text:
            m = _EXITED.search(text)
            if m:
                load = self.names.pop(m[1], None)
                if load is not None:
                    self.hooks.update_load(load, end_line_id=line_id, exit_status=int(m[2]), ended_at=ts,
                                           end_reason=f"exited with status {m[2]}")
                    if int(m[2]) != 0 and load not in self.expected_exit:
                        # unasked and without a word: killed by a signal, which the router does not pass on
                        self.hooks.crashed(load, line_id, ts, router_died(int(m[2])), int(m[2]))
                    self.expected_exit.discard(load)
                    self.draft.discard(load)
                    return load, "boundary", None
                self.unplaced["router"] += 1
                return None, "unattributed", None
            m = _BY_NAME.search(text)
            if m and m[1] in self.names:
                self.expected_exit.add(self.names[m[1]])  # asked to stop: a failing exit then is no crash
                return self.names[m[1]], "boundary", None
        self.unplaced["router"] += 1
        return None, "unattributed", None

    def _arg(self, value: str):
        load = self.args["load"]
        if value.startswith("-") and not value[1:2].isdigit():
            self.args["flag"] = value
            return load, "boundary", None
        flag, self.args["flag"] = self.args["flag"], None
        if flag in ("--model", "-m"):
            self.hooks.update_load(load, model_file=value)
        return load, "boundary", (flag_facts(flag, value) if flag else None)

    # -- Ollama -----------------------------------------------------------
    def _ollama_line(self, key, line_id, text, ts):
        """Ollama's server log: the scheduler's lines and its runners' output in one stream.

        A load starts at ``starting llama server`` (up to 0.11), ``starting
        runner`` (0.12 on) or ``starting llama-server`` (runs llama.cpp's own
        server), each with ``--model`` and the blob path. A ``starting
        runner`` without ``--model`` is the GPU discovery Ollama runs at
        start-up and before scheduling: no model, no load. The lines after a
        start are held until ``loaded runners count=N``: with 1 no other
        runner writes into the stream and they join the load; with more they
        stay unattributed, and so does everything until the next start. A
        discovery runner also writes into the stream, so after one nothing
        is attributed until the next load is proven alone.
        """
        st = self.ollama.setdefault(key, {"load": None, "exclusive": False, "pending": [], "held": None})
        if 'msg="starting ' in text and any(s in text for s in _OLLAMA_STARTS):
            m = _OLLAMA_MODEL.search(text)
            if m is None:  # a discovery runner: nothing is loaded by it, but it writes into the stream
                st["exclusive"] = False
                self.unplaced["ollama_own"] += 1
                return None, "unattributed", None
            path = m[1]
            port = _OLLAMA_PORT.search(text)
            load = self.hooks.new_load(model_name=file_name(path), model_file=path,
                                       port=int(port[1]) if port else None, start_line_id=line_id, requested_at=ts)
            # the scheduler's plan for this load was printed just before it started
            self.hooks.bind(st["pending"], load, "boundary")
            self.ollama[key] = {"load": load, "exclusive": False, "pending": [], "held": []}
            return load, "boundary", None
        load = st.get("load")
        held = st.get("held")
        is_ready = "started in" in text and _OLLAMA_READY.search(text) is not None
        is_count = 'msg="loaded runners"' in text
        if held is not None and not is_count and not is_ready:
            # between a start and the runner count (0.12 on: memory plan, the runner's whole load)
            if len(held) < _MAX_PENDING:
                held.append(line_id)
            return None, "unattributed", None
        if "msg=" in text and any(s in text for s in _OLLAMA_PLAN):  # access lines have no msg=: skip the scan
            st["pending"].append(line_id)
            return None, "unattributed", None
        if is_count:
            m = _OLLAMA_COUNT.search(text)
            st["exclusive"] = bool(m and m[1] == "1")
            st["held"] = None
            if held and load is not None and st["exclusive"]:
                self.hooks.bind(held, load, "boundary")
            elif held:
                self.unplaced["ollama_shared"] += len(held)
        elif load is not None and is_ready:
            # loads are started one at a time: the ready line is the latest start's
            if not st.get("ready"):
                self.hooks.update_load(load, ready_line_id=line_id, ready_at=ts)
                st["ready"] = True
            return load, "boundary", None
        if load is not None and st["exclusive"]:
            return load, "boundary", None
        # Ollama's own lines (its config, GPU discovery, /api/show reading a model) or a runner's among others
        self.unplaced["ollama_shared" if load is not None else "ollama_own"] += 1
        return None, "unattributed", None

    # -- phase within one load --------------------------------------------
    def _phase(self, load, line_id, text, ts):
        if "KV cache" in text and "creating" in text:
            if "non-SWA" in text:
                self.swa.discard(load)
            elif "SWA KV cache" in text:
                self.swa.add(load)
            return
        if "kv_cache: size" in text:  # the summary after a cache's buffer lines: its scope ends
            self.swa.discard(load)
            return
        if "draft" in text:
            if "loading draft model" in text or "creating MTP draft context" in text:
                self.draft.add(load)
            elif "speculative decoding context initialized" in text:
                self.draft.discard(load)
        elif "model loaded" in text:
            self.draft.discard(load)
            self.hooks.update_load(load, ready_line_id=line_id, ready_at=ts)
        elif "load_model: initializing" in text:
            self.draft.discard(load)


def scope_facts(facts: list[Fact], in_draft: bool, in_swa: bool = False) -> list[Fact]:
    """Buffer sizes printed while the draft model loads are the draft's, not the target's.

    A model with sliding-window layers gets two KV caches (``creating non-SWA
    KV cache``, then ``creating SWA KV cache``), each with its buffer line:
    the second is ``kv_swa_buffer_mib``, so neither hides the other.
    """
    if in_swa:
        facts = [f._replace(name="kv_swa_buffer_mib") if f.name == "kv_buffer_mib" else f for f in facts]
    if not in_draft:
        return facts
    return [f._replace(name="draft_" + f.name) if f.name in DRAFT_SCOPED else f for f in facts]
