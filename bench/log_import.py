"""Benchmark: import of a 200,000-line journal of llama-server and Ollama lines.

Not a timed test: it prints what it measured, goals met or not.

1. Writes a journal file with systemd-journal-remote (Debian package
   systemd-journal-remote) from journal export text: llama-server router
   lines taken from the recorded fixture (a real run of this project's
   llama-server build) with fresh ports per cycle, a single-model server
   under its own PIDs, and Ollama lines in the published formats. A few
   per cent carry ANSI colours, which journalctl hands over as byte arrays.
   About a tenth are a default-verbosity server run by ``docker compose
   up`` in a unit (each line behind compose's ``llama-1  | `` prefix, with
   its per-request ``print_timing`` blocks), and about one line in twenty
   an older build's start (ik_llama.cpp's ``INFO [ main]`` and
   ``llm_load_tensors`` lines) -- real third-party logs from
   tests/fixtures/logs/real/. Each entry carries the fields journald gives
   a service's stdout line (transport, identifiers, command line, cgroup,
   invocation and stream ids: 24, and the journal's own on export), so
   both sides read entries of a real journal's size.
2. Times ``journalctl --file F -o json > /dev/null``.
3. Times ``cardproof logs import F`` (a subprocess, as a user runs it) and
   the same import in-process, which reports how long it waited for
   journalctl's output, the CPU of the process that splits it
   (daemon/logs/split_child.py) and of the thread that takes the split
   batches over (daemon/logs/pipe.py).

Goals: parsing + attribution + storing >= 100,000 lines/s with
the journal read excluded; whole import <= 1.5 x journalctl's read time.

Each timing is taken ``--repeat`` times (default 3) and the fastest is used
on both sides of every ratio: on a shared machine other work only ever adds
time, so the minimum is the best estimate of the cost itself. All times are
printed.

Usage: python bench/log_import.py [--lines 200000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "logs" / "router-interleaved.log"
REAL = ROOT / "tests" / "fixtures" / "logs" / "real"
JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"

# Ollama lines in the formats of github.com/ollama/ollama issues #8098, #11819, #13552
OLLAMA_LOAD = [
    'time={t} level=INFO source=server.go:135 msg="system memory" total="62.7 GiB" free="56.0 GiB" free_swap="31.1 GiB"',
    'time={t} level=INFO source=server.go:175 msg=offload library=cuda layers.requested=-1 layers.model=49 '
    'layers.offload=49 layers.split="" memory.available="[23.1 GiB]" memory.gpu_overhead="0 B" '
    'memory.required.full="11.4 GiB" memory.required.kv="992.0 MiB" projector.weights="795.9 MiB" projector.graph="1.0 GiB"',
    'time={t} level=INFO source=server.go:438 msg="starting llama server" cmd="/usr/local/bin/ollama runner '
    '--ollama-engine --model /usr/share/ollama/.ollama/models/blobs/sha256-{blob} --ctx-size 8192 --batch-size 512 '
    '--n-gpu-layers 49 --threads 8 --parallel 1 --port {port}"',
    'time={t} level=INFO source=sched.go:481 msg="loaded runners" count=1',
    'time={t} level=INFO source=server.go:1294 msg="waiting for llama runner to start responding"',
    "load_tensors: offloaded 49/49 layers to GPU",
    "load_tensors:        CUDA0 model buffer size = 14634.73 MiB",
    "llama_kv_cache:      CUDA0 KV buffer size =   992.00 MiB",
    'time={t} level=INFO source=server.go:1332 msg="llama runner started in 8.62 seconds"',
]
OLLAMA_REQUEST = [
    '[GIN] 2025/12/23 - 10:34:40 | 200 | 57.956598944s |   192.168.0.131 | POST     "/api/chat"',
    '[GIN] 2025/12/23 - 10:36:24 | 200 |      6.2826ms |       127.0.0.1 | GET      "/api/tags"',
]


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished children (and theirs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _field(key: str, value: str) -> bytes:
    data = value.encode()
    if b"\n" in data:
        return key.encode() + b"\n" + len(data).to_bytes(8, "little") + data + b"\n"
    return key.encode() + b"=" + data + b"\n"


def export_entries(n_lines: int):
    """Journal export entries (bytes) for ``n_lines`` messages."""
    router = FIXTURE.read_text().splitlines()
    ports = sorted({int(p) for p in re.findall(r"on port (\d+)", "\n".join(router))})
    # poseidon's first process (lines 8-61): start, default-verbosity load, one request block, exit;
    # production traffic repeats its request (lines 48-60) a few times before the exit
    poseidon = (REAL / "poseidon-rocm-then-cpu.log").read_text().splitlines()
    compose = poseidon[7:60] + poseidon[47:60] * 4 + poseidon[60:61]
    older = (REAL / "ik-llama-pr237-15x3090.log").read_text().splitlines()
    t_us = 1_700_000_000_000_000
    produced = cycle = 0
    while produced < n_lines:
        cycle += 1
        mapping = {str(p): str(20000 + (cycle * 7 + i) % 40000) for i, p in enumerate(ports)}
        rx = re.compile("|".join(mapping))
        router_pid, ollama_pid = 1000 + cycle % 30000, 50000 + cycle % 10000
        for i, line in enumerate(router):
            msg = rx.sub(lambda m: mapping[m[0]], line)
            if i % 20 == 0:  # llama-server with colours on: journalctl returns a byte array
                msg = "\x1b[34m" + msg[:12] + "\x1b[0m" + msg[12:]
            yield _entry(t_us, router_pid, "llama-server.service", msg)
            t_us += 1000
            produced += 1
        for j in range(3):
            for tpl in OLLAMA_LOAD:
                yield _entry(t_us, ollama_pid, "ollama.service",
                             tpl.format(t="2025-08-22T17:36:22.027-04:00", port=30000 + j, blob=f"{cycle:064x}"))
                t_us += 1000
                produced += 1
            for _ in range(20):
                for tpl in OLLAMA_REQUEST:
                    yield _entry(t_us, ollama_pid, "ollama.service", tpl)
                    t_us += 1000
                    produced += 1
        for line in compose:  # `docker compose up` in a unit: the journal keeps compose's prefix
            yield _entry(t_us, 60000 + cycle % 10000, "compose-llama.service", "llama-1  | " + line)
            t_us += 1000
            produced += 1
        if cycle % 5 == 0:  # an older build restarted now and then
            for line in older:
                yield _entry(t_us, 70000 + cycle % 10000, "ik-llama.service", line)
                t_us += 1000
                produced += 1
        if produced >= n_lines:
            break


# The fields journald gives a service's stdout line (a real entry has about 25 with the journal's own
# __CURSOR and __SEQNUM), so that journalctl and the import both read entries of a real size
_SERVICE_FIELDS = {
    "llama-server.service": ("llama-server", "/usr/local/bin/llama-server",
                             "/usr/local/bin/llama-server --models-preset /etc/llama/models.ini --port 8080"),
    "ollama.service": ("ollama", "/usr/local/bin/ollama", "/usr/local/bin/ollama serve"),
    "compose-llama.service": ("docker", "/usr/bin/docker", "/usr/bin/docker compose up"),
    "ik-llama.service": ("llama-server", "/opt/ik_llama.cpp/build/bin/llama-server",
                         "/opt/ik_llama.cpp/build/bin/llama-server -m /models/DeepSeek-V3-IQ2_K_R4.gguf"),
}


def _entry(t_us: int, pid: int, unit: str, msg: str) -> bytes:
    comm, exe, cmdline = _SERVICE_FIELDS[unit]
    return b"".join((
        _field("__REALTIME_TIMESTAMP", str(t_us)),
        _field("__MONOTONIC_TIMESTAMP", str(t_us - 1_699_000_000_000_000)),
        _field("_BOOT_ID", "0123456789abcdef0123456789abcdef"),
        _field("_MACHINE_ID", "fedcba9876543210fedcba9876543210"),
        _field("_HOSTNAME", "gpu-box"),
        _field("_RUNTIME_SCOPE", "system"),
        _field("_TRANSPORT", "stdout"),
        _field("PRIORITY", "6"),
        _field("SYSLOG_FACILITY", "3"),
        _field("SYSLOG_IDENTIFIER", comm),
        _field("_UID", "998"),
        _field("_GID", "998"),
        _field("_COMM", comm),
        _field("_EXE", exe),
        _field("_CMDLINE", cmdline),
        _field("_CAP_EFFECTIVE", "0"),
        _field("_SELINUX_CONTEXT", "unconfined"),
        _field("_SYSTEMD_CGROUP", f"/system.slice/{unit}"),
        _field("_SYSTEMD_UNIT", unit),
        _field("_SYSTEMD_SLICE", "system.slice"),
        _field("_SYSTEMD_INVOCATION_ID", f"{pid:032x}"),
        _field("_STREAM_ID", f"{pid * 7:032x}"),
        _field("_PID", str(pid)),
        _field("MESSAGE", msg),
        b"\n",
    ))


def make_journal(path: Path, n_lines: int) -> int:
    proc = subprocess.Popen([JOURNAL_REMOTE, "-o", str(path), "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    n = 0
    buf = []
    for entry in export_entries(n_lines):
        buf.append(entry)
        n += 1
        if n >= n_lines:
            break
        if len(buf) >= 5000:
            proc.stdin.write(b"".join(buf))
            buf = []
    proc.stdin.write(b"".join(buf))
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit(f"systemd-journal-remote failed: {proc.stderr.read().decode()}")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--keep", type=Path, help="keep the journal and databases in this folder")
    ap.add_argument("--repeat", type=int, default=3, help="time each step this many times; the fastest counts")
    args = ap.parse_args()
    if not Path(JOURNAL_REMOTE).exists():
        raise SystemExit(f"{JOURNAL_REMOTE} missing: apt-get install systemd-journal-remote")
    work = args.keep or Path(tempfile.mkdtemp(prefix="cardproof-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    journal = work / "bench.journal"
    for p in work.glob("*.db*"):
        p.unlink()
    if journal.exists():
        journal.unlink()
    t = time.perf_counter()
    n = make_journal(journal, args.lines)
    print(f"journal: {n:,} entries written by systemd-journal-remote in {time.perf_counter() - t:.1f} s ({journal})")

    reps = max(1, args.repeat)

    def fmt(ts):
        return ", ".join(f"{t:.2f}" for t in ts)

    json_times, json_cpu = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), _children_cpu()
        subprocess.run(["journalctl", "--file", str(journal), "-o", "json"], stdout=subprocess.DEVNULL, check=True)
        json_times.append(time.perf_counter() - t)
        json_cpu.append(_children_cpu() - c)
    t_json = min(json_times)
    print(f"journalctl --file F -o json > /dev/null:   {t_json:.2f} s ({n / t_json:,.0f} entries/s; runs {fmt(json_times)})")
    t = time.perf_counter()
    subprocess.run(["journalctl", "--file", str(journal), "-o", "export"], stdout=subprocess.DEVNULL, check=True)
    t_export = time.perf_counter() - t
    print(f"journalctl --file F -o export > /dev/null: {t_export:.2f} s (the format the import reads)")

    exe = shutil.which("cardproof") or str(Path(sys.executable).with_name("cardproof"))
    cli_times, cli_cpu = [], []
    for i in range(reps):
        t, c = time.perf_counter(), _children_cpu()
        cli = subprocess.run([exe, "logs", "import", str(journal), "--db", str(work / f"cli-{i}.db")],
                             capture_output=True, text=True)
        cli_times.append(time.perf_counter() - t)
        cli_cpu.append(_children_cpu() - c)  # the import and its journalctl, both its children
        if cli.returncode != 0:
            raise SystemExit(f"cardproof logs import failed: {cli.stderr.strip()}")
    t_cli = min(cli_times)
    print(f"cardproof logs import F:                   {t_cli:.2f} s ({n / t_cli:,.0f} lines/s, Python start-up "
          f"included; runs {fmt(cli_times)})")

    from cardproof.daemon.logs import import_path
    from cardproof.daemon.store import open_store

    runs = []
    for i in range(reps):
        store = open_store(work / f"inproc-{i}.db")
        runs.append(import_path(store, journal))
        store.close()
    stats = min(runs, key=lambda st: st["seconds"] - st["read_seconds"])
    wall = stats["seconds"] - stats["read_seconds"]
    cpu = min(r["cpu_seconds"] - r["read_cpu_seconds"] for r in runs)
    print(f"in-process import: {stats['seconds']:.2f} s wall, {stats['cpu_seconds']:.2f} s CPU; the importing "
          f"thread waited {stats['read_seconds']:.2f} s for journalctl's output; splitting it took "
          f"{stats['split_cpu_seconds']:.2f} s CPU in a process of its own (daemon/logs/split_child.py), taking the "
          f"batches over {stats['read_cpu_seconds']:.2f} s on a thread (daemon/logs/pipe.py); without the wait, "
          f"runs {fmt(r['seconds'] - r['read_seconds'] for r in runs)} s")
    print(f"  lines {stats['lines']:,}, attributed {stats['attributed']:,}, unattributed {stats['unattributed']:,}, "
          f"facts {stats['facts']:,}, loads {stats['loads']:,}")
    rate_wall = stats["lines"] / wall if wall > 0 else float("inf")
    rate_cpu = stats["lines"] / cpu if cpu > 0 else float("inf")
    ratio = t_cli / t_json
    # the goal is the importing thread's own work: its CPU time (the process's, less the reading thread's) is
    # what a busy machine cannot inflate; its wall time also holds the reading thread's turns at Python's lock
    print(f"parsing + attribution + storing: {rate_cpu:,.0f} lines/s of the importing thread's CPU time, "
          f"{rate_wall:,.0f} lines/s wall (goal >= 100,000): {'met' if rate_cpu >= 100_000 else 'NOT met'}")
    # the same goal against the baseline of this run: the issue puts journalctl at about 90,000 entries/s
    # on these machines, so 100,000 lines/s is 0.9 x journalctl's own read time for the same journal
    rel = wall / t_json
    print(f"parsing + attribution + storing / journalctl -o json read: {rel:.2f} (the goal above, taken against "
          f"this run's journalctl at the issue's 90,000 entries/s: <= 0.90): {'met' if rel <= 0.9 else 'NOT met'}")
    print(f"whole import / journalctl -o json read: {ratio:.2f} (goal <= 1.5): {'met' if ratio <= 1.5 else 'NOT met'}")
    # CPU seconds are what other work on a shared machine does not add to: the same ratio as cost, not time
    print(f"  as CPU time: import with its journalctl {min(cli_cpu):.2f} s / journalctl -o json {min(json_cpu):.2f} s"
          f" = {min(cli_cpu) / min(json_cpu):.2f} (a machine with a second core free runs the importer, the "
          f"splitting process and journalctl side by side, so its wall time is below its CPU time)")
    print(f"load average while measuring: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          "(other work on the machine inflates every wall time above)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
