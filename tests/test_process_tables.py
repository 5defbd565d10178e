"""Process tables through psutil, on real processes of this machine.

A real process tree (a shell with a child and a grandchild), a real listening
socket and the real /proc for comparison; nothing is recorded.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from cardproof.daemon.store import liveness
from cardproof.daemon.memory.procinfo import children, listening_pids, pids_with_arg, server_pids


def _tree():
    """python (top) -> python (child, marker-a) -> python (grandchild, marker-b)."""
    marker = f"cardproof-tree-{time.time_ns()}"
    sleeper = "import time; time.sleep(30)"
    child = ("import subprocess, sys, time; "
             f"subprocess.Popen([sys.executable, '-c', {sleeper!r}, '{marker}-b']); time.sleep(30)")
    top = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}, '{marker}-a']); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", top])
    for _ in range(200):
        if len(children(proc.pid)) >= 2:
            break
        time.sleep(0.05)
    return proc, marker


def test_children_are_direct_and_indirect_and_none_for_a_gone_process():
    proc, marker = _tree()
    try:
        kids = children(proc.pid)
        assert len(kids) == 2 and proc.pid not in kids
        grandchild = pids_with_arg(f"{marker}-b")
        assert len(grandchild) == 1 and grandchild[0] in kids
        assert server_pids(pid=proc.pid, include_children=True) == (sorted([proc.pid, *kids]), "pid+children")
    finally:
        for p in children(proc.pid):
            subprocess.run(["kill", str(p)], check=False)
        proc.kill()
        proc.wait()
    assert children(proc.pid) == []


def test_an_argument_is_matched_whole_or_as_a_path_end_never_as_a_fragment():
    blob = f"sha256-{time.time_ns():x}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--model", f"/blobs/{blob}"])
    try:
        time.sleep(0.2)
        assert pids_with_arg(blob) == [proc.pid]
        assert pids_with_arg(f"/blobs/{blob}") == [proc.pid]
        assert pids_with_arg(blob[:-1]) == []
    finally:
        proc.kill()
        proc.wait()


def test_the_listener_of_a_port_is_found_and_a_connected_socket_is_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            import os

            assert listening_pids(port) == [os.getpid()]
    assert listening_pids(port) == []


def test_boot_time_is_the_kernels():
    btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                 if line.startswith("btime "))
    assert liveness._boot_time() == datetime.fromtimestamp(btime, timezone.utc)
