"""Does the installed llama-server run quantized models on this machine? Exit 0 if so.

A llama.cpp built with ``-march=native`` on a VM that advertises AMX without
granting it dies with SIGILL (``tilezero``) on every quantized model, and pip
may hand back such a build from its wheel cache whatever CMAKE_ARGS say. So
the check is functional: a tiny generated model quantized to Q4_1 and Q8_0
with the built ``llama-quantize``, each loaded by the built ``llama-server``
and asked for a few tokens. ``.ci/run`` rebuilds without the cache when this
fails. One line per model; a crash names its signal.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from cardproof.daemon.server import llamacpp
from cardproof.daemon.server.tinymodels import make_tiny


def check(qtype: str, base: Path, work: Path) -> str | None:
    """None when a ``qtype`` model answered; else what went wrong, in one line."""
    quantize = llamacpp.find_binary("llama-quantize")
    model = work / f"tiny-b.{qtype}.gguf"
    out = subprocess.run([str(quantize), str(base), str(model), qtype], env=llamacpp.server_env(quantize),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return f"llama-quantize to {qtype} failed (exit {out.returncode})"
    server = llamacpp.LlamaServerProcess(["-m", str(model), "--threads", "2", "-c", "256", "--no-webui"],
                                         log_path=work / f"server-{qtype}.log")
    try:
        server.start(ready_timeout_s=60)
        resp = httpx.post(server.url + "/completion", json={"prompt": "the quiet river", "n_predict": 4},
                          timeout=60)
        resp.raise_for_status()
    except (llamacpp.LlamaServerFailed, httpx.HTTPError) as exc:
        code = server.proc.poll() if server.proc else None
        if code is not None and code < 0:
            return f"llama-server died by {signal.Signals(-code).name} on a {qtype} model"
        return f"llama-server on a {qtype} model: {exc}"
    finally:
        server.stop()
    return None


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = make_tiny(work)["tiny-b"]
        failed = False
        for qtype in ("Q4_1", "Q8_0"):
            problem = check(qtype, base, work)
            print(f"{qtype}: {problem or 'answered'}", file=sys.stderr)
            failed = failed or problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
