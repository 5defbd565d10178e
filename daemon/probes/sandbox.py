"""Run a model's Python function against tests in a bounded subprocess.

Bounded, not a sandbox against hostile code: the child is a fresh
interpreter (``-I``: no site, no user paths, no environment) in an empty
temporary folder, with limits on CPU time, memory and file size, a
wall-clock timeout, and an audit hook that refuses sockets, subprocesses,
``fork``/``exec*``, deletions and file writes outside its folder. The
code under test comes from a model that may be confused, not from an
attacker; the limits stop the accidents (an endless loop, a huge list, a
stray ``requests.get``).

The child reports one JSON line after a marker, so whatever the model's code
prints cannot be mistaken for the result.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARKER = "@@cardproof-result@@"
MEMORY_BYTES = 512 * 2**20

# Runs inside the child. The audit hook comes first, before the model's code is
# even compiled; results go through a reference to stdout taken before that.
HARNESS = r'''
import json, os, resource, sys
out = sys.stdout
spec = json.load(open("spec.json"))
cpu = spec["cpu_s"]
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (spec["memory_bytes"], spec["memory_bytes"]))
resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
here = os.path.realpath(os.getcwd())
BLOCKED = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
           "os.forkpty", "os.kill", "os.remove", "os.unlink", "os.rmdir", "os.rename", "shutil.rmtree",
           "ctypes.", "pty.", "webbrowser.", "urllib.Request", "http.client.")
def hook(event, args):
    if event.startswith(BLOCKED):
        raise PermissionError(f"cardproof probe: {event} is not allowed here")
    if event == "open" and isinstance(args[0], str):
        mode, flags = str(args[1] or ""), args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        writing = any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        if writing and not os.path.realpath(args[0]).startswith(here + os.sep):
            raise PermissionError("cardproof probe: writing outside the work folder is not allowed")
source = open("solution.py").read()
sys.addaudithook(hook)
def report(**kw):
    out.write("\n@@cardproof-result@@" + json.dumps(kw, default=repr) + "\n")
    out.flush()
try:
    code = compile(source, "solution.py", "exec")
except SyntaxError as exc:
    report(stage="compile", error=f"SyntaxError: {exc.msg} (line {exc.lineno})")
    raise SystemExit(0)
ns = {"__name__": "solution"}
try:
    exec(code, ns)
except BaseException as exc:
    report(stage="import", error=f"{type(exc).__name__}: {exc}"[:300])
    raise SystemExit(0)
fn = ns.get(spec["function"])
if not callable(fn):
    report(stage="missing", error=f"no function {spec['function']!r} defined")
    raise SystemExit(0)
failures = []
for args, expected in spec["tests"]:
    try:
        got = fn(*json.loads(json.dumps(args)))
        ok = got == expected
    except BaseException as exc:
        got, ok = f"{type(exc).__name__}: {exc}"[:200], False
    if not ok:
        failures.append({"args": args, "expected": expected, "got": got})
report(stage="ran", passed=len(spec["tests"]) - len(failures), total=len(spec["tests"]), failures=failures[:5])
'''


def run_tests(source: str, function: str, tests: list, *, timeout_s: float = 10.0) -> dict:
    """Run ``function`` from ``source`` against ``tests`` ([[args], expected]); never raises.

    Returns ``{"stage": compile|import|missing|ran|timeout|crashed, ...,
    "duration_ms": ...}``.
    """
    cpu_s = math.ceil(timeout_s) + 1  # the wall clock should usually end it first
    with tempfile.TemporaryDirectory(prefix="cardproof-probe-") as tmp:
        Path(tmp, "solution.py").write_text(source)
        # the child sets its own limits first thing: preexec_fn is unsafe while
        # the runner's memory sampler thread is running
        Path(tmp, "spec.json").write_text(json.dumps({"function": function, "tests": tests,
                                                      "cpu_s": cpu_s, "memory_bytes": MEMORY_BYTES}))
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-S", "-c", HARNESS], cwd=tmp, env={"PATH": "/usr/bin:/bin"},
                capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return {"stage": "timeout", "error": f"no result within {timeout_s:g} s",
                    "duration_ms": (time.perf_counter() - t0) * 1000.0}
        ms = (time.perf_counter() - t0) * 1000.0
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(MARKER):
                return json.loads(line[len(MARKER):]) | {"duration_ms": ms}
        if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):  # the CPU-time limit, not a crash
            return {"stage": "timeout", "error": f"CPU time limit of {cpu_s} s", "duration_ms": ms}
        reason = f"exit code {proc.returncode}"
        if proc.returncode and proc.returncode < 0:
            reason = f"killed by signal {-proc.returncode}"
        return {"stage": "crashed", "error": reason, "stderr": proc.stderr[-500:], "duration_ms": ms}
