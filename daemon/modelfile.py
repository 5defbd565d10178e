"""Identity of a model file: size, digest, architecture and quantisation."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

FULL_DIGEST_LIMIT = 2 * 2**30  # hashing 20 GB files on every run would cost minutes
PARTIAL_CHUNK = 64 * 2**20

# llama_ftype values as written by llama.cpp's converters (general.file_type)
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4",
}


# Ollama stores weights as blobs named by their SHA-256: sha256-<hex> on disk and on a runner's
# command line, sha256:<hex> in older API docs
_BLOB = re.compile(r"sha256[:-]([0-9a-f]{64})")


def blob_digest(path: str | None) -> str | None:
    """The hex digest an Ollama blob path names, in either spelling; None for any other path."""
    m = _BLOB.search(path or "")
    return m[1] if m else None


def digest(path: Path) -> tuple[str, str]:
    """(hex digest, kind): full SHA-256 for small files, head+tail+size for big ones."""
    size = path.stat().st_size
    h = hashlib.sha256()
    with path.open("rb") as f:
        if size <= FULL_DIGEST_LIMIT:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return h.hexdigest(), "sha256"
        h.update(str(size).encode())
        h.update(f.read(PARTIAL_CHUNK))
        f.seek(size - PARTIAL_CHUNK)
        h.update(f.read(PARTIAL_CHUNK))
    return h.hexdigest(), "sha256-head-tail-64MiB"


def gguf_meta(path: Path) -> dict:
    """Architecture and quantisation from the GGUF header, if gguf is installed."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return {}
    try:
        reader = GGUFReader(str(path))
    except Exception:
        return {}
    out = {}
    field = reader.get_field("general.architecture")
    if field is not None:
        out["architecture"] = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    field = reader.get_field("general.file_type")
    if field is not None:
        ft = int(field.parts[field.data[0]][0])
        out["quantisation"] = FILE_TYPES.get(ft, f"ftype {ft}")
    return out


def describe(name: str, path: str | None) -> dict:
    """A ``models`` row for ``name``; file columns stay empty when no file is known."""
    row = {"name": name, "path": path}
    if path:
        p = Path(path)
        if p.is_file():
            row["file_bytes"] = p.stat().st_size
            row["digest"], row["digest_kind"] = digest(p)
            row.update(gguf_meta(p))
    return row
