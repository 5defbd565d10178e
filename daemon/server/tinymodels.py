"""Tiny random-weight GGUF models that the real llama-server loads.

They give real loads, real counters and real log lines without a download.
Two differently sized llama models and a draft model that shares the first
one's tokenizer (so speculative decoding really runs). The second model's
vocabulary knows fewer whole words than the first, so the same prompt costs
it more tokens -- as with real models whose tokenizers differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cardproof.daemon.server.prompts import FILLER_WORDS, INSTRUCTION

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)

# gguf token types
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 3, 4, 6


@dataclass(frozen=True)
class TinySpec:
    name: str
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    vocab: str  # "full" or "fewer": how many filler words get whole-word tokens
    seed: int


TINY_MODELS = (
    TinySpec("tiny-a", n_embd=128, n_layer=2, n_ff=256, n_head=4, n_head_kv=2, vocab="full", seed=1),
    TinySpec("tiny-b", n_embd=256, n_layer=4, n_ff=640, n_head=8, n_head_kv=4, vocab="fewer", seed=2),
    TinySpec("tiny-draft", n_embd=64, n_layer=1, n_ff=128, n_head=2, n_head_kv=1, vocab="full", seed=3),
)

DRAFT_FOR = {"tiny-a": "tiny-draft"}


def build_vocab(kind: str) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style vocabulary: specials, 256 byte tokens, word prefixes.

    llama.cpp's SPM tokenizer only merges adjacent pieces into pieces that
    exist, so every prefix of a whole-word token is in the vocabulary too.
    """
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    types = [_UNKNOWN, _CONTROL, _CONTROL, _CONTROL, _CONTROL, _USER_DEFINED, _USER_DEFINED]
    scores = [0.0] * len(tokens)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        # The bytes above ASCII are control tokens: prompts are ASCII and never need them, and a
        # random-weight model that ends an answer on a lone UTF-8 lead byte (0xC0 ...) made llama-server
        # fail the request ("invalid UTF-8 byte", HTTP 500 in the stream). A control token is never
        # printed, so an answer is ASCII text and every such failure is a real one.
        types.append(_BYTE if b < 0x80 else _CONTROL)
        scores.append(0.0)
    words = sorted(set(FILLER_WORDS) | set(INSTRUCTION.rstrip(".").split()) | {"Request"})
    pieces: list[str] = ["\u2581"]
    for n, w in enumerate(words):
        # "fewer": every third word lacks its whole-word piece and costs two
        # tokens (prefix + last byte), so prompts run about a third longer
        full = not (kind == "fewer" and n % 3 == 0 and len(w) > 1)
        for i in range(1, len(w) + (1 if full else 0)):
            pieces.append("\u2581" + w[:i])
        if full:
            pieces.append("\u2581" + w)
    for p in dict.fromkeys(pieces):
        tokens.append(p)
        types.append(_NORMAL)
        scores.append(float(len(p)))  # longer pieces merge first
    return tokens, scores, types


def write_model(spec: TinySpec, path: Path, *, basename: str | None = None) -> Path:
    """Write one tiny llama GGUF file to ``path`` (``basename``: the header's ``general.basename``)."""
    import numpy as np
    import gguf

    rng = np.random.default_rng(spec.seed)
    tokens, scores, types = build_vocab(spec.vocab)
    n_vocab = len(tokens)
    head_dim = spec.n_embd // spec.n_head
    n_embd_kv = head_dim * spec.n_head_kv

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(spec.name)
    if basename is not None:
        w.add_basename(basename)
    w.add_context_length(16384)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(4)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_chat_template(CHAT_TEMPLATE)

    def mat(rows: int, cols: int):
        return (rng.standard_normal((rows, cols)) * 0.08).astype(np.float16)

    def norm(n: int):
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", mat(n_vocab, spec.n_embd))
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(spec.n_embd))
        w.add_tensor(p + "attn_q.weight", mat(spec.n_embd, spec.n_embd))
        w.add_tensor(p + "attn_k.weight", mat(n_embd_kv, spec.n_embd))
        w.add_tensor(p + "attn_v.weight", mat(n_embd_kv, spec.n_embd))
        w.add_tensor(p + "attn_output.weight", mat(spec.n_embd, spec.n_embd))
        w.add_tensor(p + "ffn_norm.weight", norm(spec.n_embd))
        w.add_tensor(p + "ffn_gate.weight", mat(spec.n_ff, spec.n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(spec.n_ff, spec.n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(spec.n_embd, spec.n_ff))
    w.add_tensor("output_norm.weight", norm(spec.n_embd))
    w.add_tensor("output.weight", mat(n_vocab, spec.n_embd))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def make_tiny(directory: Path | str, *, progress=None) -> dict[str, Path]:
    """Write every tiny model into ``directory``; returns name -> file path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for i, spec in enumerate(TINY_MODELS, 1):
        path = directory / f"{spec.name}.gguf"
        if not path.exists():
            tmp = path.with_suffix(".gguf.part")
            write_model(spec, tmp)
            tmp.replace(path)
        if progress:
            progress(f"[{i}/{len(TINY_MODELS)}] {path} ({path.stat().st_size / 1e6:.1f} MB)")
        out[spec.name] = path
    return out
