"""Helpers for the log-evidence tests: a real router log with two interleaved loads.

Also run as a script to refresh the recorded fixture from the real server:
``python tests/logs_helpers.py tests/fixtures/logs/router-interleaved.log``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import httpx

from cardproof.daemon.server import llamacpp
from cardproof.daemon.server.tinymodels import DRAFT_FOR, make_tiny


JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"


def export_entry(message: str | bytes, *, pid: int, unit: str, t_us: int) -> bytes:
    """One entry of the journal export format (binary-safe MESSAGE)."""
    data = message.encode() if isinstance(message, str) else message
    fields = [f"__REALTIME_TIMESTAMP={t_us}\n".encode(), f"__MONOTONIC_TIMESTAMP={t_us % 10**9}\n".encode(),
              b"_BOOT_ID=0123456789abcdef0123456789abcdef\n", f"_PID={pid}\n".encode(),
              f"_SYSTEMD_UNIT={unit}\n".encode()]
    fields.append(b"MESSAGE\n" + len(data).to_bytes(8, "little") + data + b"\n")
    return b"".join(fields) + b"\n"


def write_journal(path: Path, entries: list[tuple], *, t0_us: int = 1_700_000_000_000_000) -> None:
    """Append ``(message, pid, unit)`` entries to a real journal file via systemd-journal-remote."""
    import subprocess

    data = b"".join(export_entry(m, pid=p, unit=u, t_us=t0_us + i * 1000) for i, (m, p, u) in enumerate(entries))
    proc = subprocess.run([JOURNAL_REMOTE, "-o", str(path), "-"], input=data, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"systemd-journal-remote failed: {proc.stderr.decode()}")


def start_router2(models: dict[str, Path], workdir: Path) -> llamacpp.LlamaServerProcess:
    """Router mode, two models at once (``--models-max 2``), tiny-a with a draft model."""
    preset = llamacpp.write_preset(
        workdir / "models.ini",
        {n: p for n, p in models.items() if n not in DRAFT_FOR.values()},
        {t: models[d] for t, d in DRAFT_FOR.items()},
        ctx_size=2048,
    )
    server = llamacpp.LlamaServerProcess(
        llamacpp.router_args(preset, models_max=2), log_path=workdir / "llama-server.log"
    )
    return server.start()


def interleave_requests(url: str, models=("tiny-a", "tiny-b"), per_model: int = 3) -> dict[int, str]:
    """Chat with both models from parallel threads; returns the router's port -> model map."""
    errors: list[str] = []

    def worker(model: str) -> None:
        for i in range(per_model):
            try:
                r = httpx.post(url + "/v1/chat/completions", timeout=120, json={
                    "model": model, "max_tokens": 6,
                    "messages": [{"role": "user", "content": f"count {i} for {model}"}],
                })
                if r.status_code != 200:
                    errors.append(f"{model}: HTTP {r.status_code} {r.text[:200]}")
            except httpx.HTTPError as exc:
                errors.append(f"{model}: {exc}")

    threads = [threading.Thread(target=worker, args=(m,)) for m in models for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    ports = {}
    for m in httpx.get(url + "/models", timeout=10).json()["data"]:
        status = m.get("status") or {}
        args = status.get("args") or []
        if "--port" in args:
            ports[int(args[args.index("--port") + 1])] = m["id"]
    return ports


if __name__ == "__main__":  # refresh the recorded fixture
    import tempfile

    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        server = start_router2(make_tiny(tmp / "models"), tmp)
        try:
            print(interleave_requests(server.url))
        finally:
            server.stop()
        text = (tmp / "llama-server.log").read_text()
    out.write_text(text.replace(str(tmp), "/tmp/cardproof-fixture"))
    print(f"{out}: {len(text.splitlines())} lines")
