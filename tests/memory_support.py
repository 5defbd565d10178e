"""Helpers for the memory tests: stand-in server processes, a run in the store.

A stand-in is a real child process (so /proc knows it) that holds a file
under a test folder open, the way a CUDA process holds /dev/nvidia0, and
optionally listens on a TCP port, the way a router child does.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from cardproof.daemon.store import open_store, utcnow

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"

_STANDIN = r"""
import socket, sys, time
dev = open(sys.argv[1], "w") if sys.argv[1] != "-" else None
srv = None
if sys.argv[2] != "0":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(sys.argv[2]))); srv.listen(1)
print("ready", flush=True)
time.sleep(600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandIn:
    """A live process that looks like a GPU process to the PID checks."""

    def __init__(self, device_file: Path | None, port: int = 0, extra_args=()):
        self.port = port
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _STANDIN, str(device_file) if device_file else "-", str(port), *extra_args],
            stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def make_run(db_path: Path, *, model="qwen3.8:27b"):
    """A store with one campaign, run, model and load, as the runner writes them."""
    store = open_store(db_path)
    cid = store.insert("campaigns", {"name": "memory", "path": "x.toml", "sha256": "0" * 64,
                                     "toml_text": "", "registered_at": utcnow()})
    run_id = store.insert("runs", {"campaign_id": cid, "host": "test", "gpus_json": "{}", "backend": "ollama",
                                   "server_url": "http://127.0.0.1:1", "started_at": utcnow(), "status": "running"})
    model_id = store.upsert_model({"name": model, "digest": "22130167c4c2"})
    return store, run_id, model_id


def add_load(store, run_id, model_id, *, port=None, pid=None, ended=False) -> int:
    now = utcnow()
    return store.insert("loads", {"run_id": run_id, "model_id": model_id, "trigger": "explicit",
                                  "requested_at": now, "ready_at": now, "load_seconds": 1.0, "status": "loaded",
                                  "port": port, "pid": pid, "ended_at": utcnow() if ended else None})


def add_cell(store, run_id, model_id, *, pinned=True, prompt_class="short") -> int:
    cell_id = store.insert("cells", {"run_id": run_id, "model_id": model_id, "position": 0,
                                     "prompt_class": prompt_class, "reasoning": 0, "max_tokens": 8,
                                     "repetitions": 1, "pinned": int(pinned)})
    store.insert("samples", {"run_id": run_id, "cell_id": cell_id, "repetition": 1, "nonce": "n",
                             "started_at": utcnow(), "kind": "measure"})
    return cell_id


def add_seed_lines(store, run_id, load_id) -> None:
    """The seed load's log lines and the facts the log parsers make of them."""
    src = store.insert("log_sources", {"kind": "plain", "name": "seed.log"})
    for entry in fixture("seed_load_lines.json")["lines"]:
        line_id = store.insert("log_lines", {"source_id": src, "run_id": run_id, "ts": utcnow(),
                                             "raw": entry["raw"], "load_id": load_id, "attribution": "pid"})
        for name, device, value in entry["facts"]:
            store.insert("facts", {"load_id": load_id, "line_id": line_id, "name": name, "device": device,
                                   "value_num": value, "unit": "MiB"})
