"""Prompt classes built from one filler text, each carrying a random nonce.

The target sizes are in tokens of a typical English tokenizer (about 1.3
tokens per word). The real count differs per tokenizer, so the runner stores
the ``prompt_n`` the server reports for every sample; the target is only how
the text is sized.
"""

from __future__ import annotations

import secrets

# Target sizes in tokens, as in the seeds: short ~40, medium ~1,200, long ~4,800.
PROMPT_CLASSES: dict[str, int] = {"short": 40, "medium": 1200, "long": 4800}

TOKENS_PER_WORD = 1.3

# A plain, repetitive filler: the content does not matter, the length does.
FILLER_WORDS = (
    "the quiet river runs past an old mill where a miller keeps his ledger of grain "
    "and weather every morning he counts the sacks notes the height of the water "
    "and writes down what the carts brought from the valley farms in spring the "
    "stream is fast and the wheel turns all day in summer it slows and the miller "
    "waits for rain while the village talks about prices roads and the long road "
    "to the market town"
).split()

INSTRUCTION = "Summarise the following notes in one sentence."


def filler(n_words: int) -> str:
    """``n_words`` words of filler text, cycling through the word list."""
    words = [FILLER_WORDS[i % len(FILLER_WORDS)] for i in range(n_words)]
    # Full stops every 12 words keep the text looking like prose to a tokenizer.
    out = []
    for i, w in enumerate(words, 1):
        out.append(w + ("." if i % 12 == 0 else ""))
    return " ".join(out)


def new_nonce() -> str:
    """A fresh random nonce; it opens the prompt so no prefix cache can match."""
    return secrets.token_hex(8)


def build_prompt(target_tokens: int, nonce: str) -> str:
    """The prompt for a class of ``target_tokens``, opened by ``nonce``."""
    head = f"Request {nonce}. {INSTRUCTION}"
    head_words = len(head.split())
    n_words = max(1, round(target_tokens / TOKENS_PER_WORD) - head_words)
    return f"{head}\n\n{filler(n_words)}"
