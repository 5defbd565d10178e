"""Identity of a model file: size, digest, architecture and quantisation."""

from __future__ import annotations

import hashlib
import re
import struct
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


#: GGUF value types (ggml's gguf.h): fixed widths; 8 is a string, 9 an array
_GGUF_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
#: the header keys a shape needs (``{arch}.`` ones are read for the file's own architecture)
_WANTED = ("general.architecture", "general.file_type", "general.basename", "tokenizer.ggml.model",
           "tokenizer.ggml.pre", "split.count")
_TOKENIZER_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges")


class _Header:
    """A little-endian GGUF (v2, v3) header read from a memory map, value by value."""

    def __init__(self, buf):
        self.buf, self.at = buf, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.at)
        self.at += struct.calcsize("<" + fmt)
        return value

    def string(self) -> bytes:
        n = self.take("Q")
        if n > len(self.buf) - self.at:
            raise ValueError("string past the end of the file")
        self.at += n
        return bytes(self.buf[self.at - n:self.at])

    def skip_string(self) -> None:
        n = self.take("Q")
        if n > len(self.buf) - self.at:
            raise ValueError("string past the end of the file")
        self.at += n

    def value(self, kind: int, keep: bool):
        """The value (``keep``) or None after skipping it; an array is skipped whole, elements unread."""
        if kind in _GGUF_FIXED:
            value = self.take(_GGUF_FIXED[kind])
            return value if keep else None
        if kind == _GGUF_STRING:
            return self.string() if keep else self.skip_string()
        if kind != _GGUF_ARRAY:
            raise ValueError(f"unknown GGUF value type {kind}")
        inner, n = self.take("I"), self.take("Q")
        if inner in _GGUF_FIXED:
            self.at += n * struct.calcsize("<" + _GGUF_FIXED[inner])
        else:
            for _ in range(n):
                self.value(inner, False)
        return None


def gguf_header(path: Path) -> dict:
    """What a model's shape is, from its GGUF header alone (no tensor data is read).

    ``architecture``, ``quantisation``, ``basename``; ``params`` (every tensor's elements),
    ``expert_count`` / ``expert_used_count`` (a mixture of experts; 0 or absent: dense) and
    ``active_params`` (what one token passes through: the routed experts' tensors count at
    used/count); ``tokenizer_sha256`` over the tokenizer's model, pre-tokenizer, tokens and merges as
    stored, so two files of one base model share it and a retrained vocabulary does not. The report's
    findings tell a quantisation ladder of one base model from one of several by these. Empty for a file
    that is no GGUF or that this reader cannot follow: never a guess.

    The gguf package's reader makes a Python object per token (2.5 s for a 49k vocabulary, more for
    150k); this walks the header once and hashes the token arrays as the bytes they are.
    """
    scanned = _scan(path)
    if scanned is None:
        return {}
    kv, params, experts, tokenizer = scanned
    parts = split_parts(path, kv)
    for part in parts[1:]:  # gguf-split: the first part holds the metadata, every part its tensors
        more = _scan(part)
        if more is None:  # a part missing or cut off: its size is not known, never a guess
            params = experts = 0
            break
        params += more[1]
        experts += more[2]

    out: dict = {}
    arch = kv.get("general.architecture")
    if isinstance(arch, bytes):
        out["architecture"] = arch.decode("utf-8", "replace")
    ft = kv.get("general.file_type")
    if isinstance(ft, int):
        out["quantisation"] = FILE_TYPES.get(ft, f"ftype {ft}")
    if isinstance(kv.get("general.basename"), bytes):
        out["basename"] = kv["general.basename"].decode("utf-8", "replace")
    if params:
        out["params"] = params
        count = next((v for k, v in kv.items() if k.endswith(".expert_count")), None)
        used = next((v for k, v in kv.items() if k.endswith(".expert_used_count")), None)
        out["expert_count"] = count if isinstance(count, int) else 0
        out["expert_used_count"] = used if isinstance(used, int) else 0
        moe = out["expert_count"] > 0 and 0 < out["expert_used_count"] <= out["expert_count"]
        out["active_params"] = (params - experts + round(experts * out["expert_used_count"] / out["expert_count"])
                                if moe else params)
    if tokenizer is not None:
        for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
            if isinstance(kv.get(key), bytes):
                tokenizer.update(key.encode() + kv[key])
        out["tokenizer_sha256"] = tokenizer.hexdigest()
    if len(parts) > 1:
        out["split_parts"] = len(parts)
    return out


#: a gguf-split part's name: ``<stem>-00001-of-00003.gguf``
_SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def split_parts(path: Path, kv: dict | None = None) -> list[Path]:
    """Every file of a model that gguf-split cut into parts, first part first; ``[path]`` for a whole file.

    llama.cpp loads such a model from its first part and finds the others by the name pattern
    ``-NNNNN-of-MMMMM.gguf`` (``split.count`` in the first part's header says how many). A part that is
    missing is still listed, so a reader of it fails rather than counting a model short.
    """
    path = Path(path)
    m = _SPLIT_NAME.match(path.name)
    count = (kv or {}).get("split.count")
    if not m or int(m["no"]) != 1:
        return [path]
    n = count if isinstance(count, int) and count > 0 else int(m["count"])
    if n <= 1:
        return [path]
    return [path.with_name(f"{m['stem']}-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]


def _scan(path: Path):
    """(wanted header values, tensor elements, routed-expert elements, tokenizer hash or None) of one
    GGUF file, or None for a file that is no GGUF or that this reader cannot follow."""
    import mmap

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if bytes(buf[:4]) != b"GGUF":
                return None
            h = _Header(buf)
            h.at = 4
            if h.take("I") not in (2, 3):
                return None
            n_tensors, n_kv = h.take("Q"), h.take("Q")
            kv: dict[str, object] = {}
            tokenizer = hashlib.sha256()
            hashed = False
            for _ in range(n_kv):
                key = h.string().decode("utf-8", "replace")
                kind = h.take("I")
                arch = kv.get("general.architecture")
                wanted = key in _WANTED or (isinstance(arch, bytes) and key in (
                    f"{arch.decode()}.expert_count", f"{arch.decode()}.expert_used_count"))
                start = h.at
                value = h.value(kind, wanted)
                if wanted:
                    kv[key] = value
                if key in _TOKENIZER_ARRAYS:
                    tokenizer.update(key.encode() + bytes(buf[start:h.at]))
                    hashed = True
            params = experts = 0
            for _ in range(n_tensors):
                name = h.string()
                dims = [h.take("Q") for _ in range(h.take("I"))]
                h.take("I")  # its type
                h.take("Q")  # its offset
                n = 1
                for d in dims:
                    n *= d
                params += n
                if b"_exps." in name:
                    experts += n
    except (OSError, ValueError, OverflowError, IndexError, struct.error):  # cut off, or not what it says
        return None
    return kv, params, experts, (tokenizer if hashed else None)


def gguf_meta(path: Path) -> dict:
    """The ``models`` columns a GGUF file's header gives (see :func:`gguf_header`)."""
    return gguf_header(path)


def describe(name: str, path: str | None) -> dict:
    """A ``models`` row for ``name``; file columns stay empty when no file is known."""
    row = {"name": name, "path": path}
    if path:
        p = Path(path)
        if p.is_file():
            meta = gguf_meta(p)
            parts = split_parts(p) if meta.get("split_parts") else [p]
            if all(q.is_file() for q in parts):  # a part missing: the model's size is not known
                row["file_bytes"] = sum(q.stat().st_size for q in parts)
            row["digest"], row["digest_kind"] = digest(p)
            meta.pop("split_parts", None)
            row.update(meta)
    return row
