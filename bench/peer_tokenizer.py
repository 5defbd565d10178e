"""A Hugging Face tokenizer folder for a tiny GGUF model, so GuideLLM can size prompts offline.

GuideLLM counts its synthetic prompts' tokens with a Hugging Face tokenizer
(``AutoTokenizer.from_pretrained``); the Hub cannot be reached here, and
the tiny models' vocabulary exists only in their GGUF files. This script
runs with GuideLLM's own venv's Python (``tokenizers`` and ``transformers``
are there, never in cardproof's): it reads the vocabulary as JSON on stdin
-- pieces, scores, types and the chat template, written by
``peer_agreement.py`` from ``daemon/tinymodels.build_vocab`` -- and writes
``tokenizer.json`` and ``tokenizer_config.json`` into the folder given.

The tiny models use llama.cpp's SentencePiece (SPM) tokenizer: "▁" marks a
word start, every prefix of a piece is a piece, longer pieces win, and text
without a piece falls back to byte tokens ``<0xNN>``. A Unigram model whose
scores prefer fewer, longer pieces, with byte fallback, splits text the
same way closely enough to size prompts: ``peer_agreement.py`` prints the
server's own prompt count of both tools' requests (GuideLLM's 128 asked
tokens came back as 157, the chat template's ~29 tokens included).

    .../guidellm-venv/bin/python bench/peer_tokenizer.py OUT_DIR < vocab.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

_CONTROL, _BYTE = 3, 6


def export(vocab: dict, out: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    pieces, types = vocab["tokens"], vocab["types"]
    # Viterbi maximises the sum of scores: a large cost per piece makes the split with the fewest
    # pieces win, the piece's length breaks ties, and a byte costs more than any piece
    scores = [(-1000.0 if t == _BYTE else -100.0 + len(p)) for p, t in zip(pieces, types)]
    model = models.Unigram([(p, s) for p, s in zip(pieces, scores)], unk_id=0, byte_fallback=True)
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False)
                            for p, t in zip(pieces, types) if t == _CONTROL])
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": False, "add_eos_token": False,
        "model_max_length": vocab.get("n_ctx", 8192),
        "chat_template": vocab["chat_template"],
    }, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: peer_tokenizer.py OUT_DIR < vocab.json")
    export(json.load(sys.stdin), Path(sys.argv[1]))
