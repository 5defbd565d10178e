"""Every answer exactly ``max_tokens`` long, so that two arms of a bench do the same work.

The tiny models stop at their end-of-sequence token wherever the random
weights put it: with ``max_tokens = 32`` one answer has 2 tokens, the next
32, and a request's time follows its length. Two arms compared on such
requests differ by the answers they happened to get -- in the runner bench
that spread (single rounds from 0.73 to 1.37) buried a 1-2 ms overhead.
With llama-server's ``ignore_eos`` every request generates ``max_tokens``
tokens, in every arm and every tool, as llama-bench's ``-n`` does.

``fixed_length()`` adds ``ignore_eos`` to every body cardproof's
OpenAI-compatible backends build (llama-server's included) while it is
active; the bare loops and GuideLLM's scenarios add it to their own bodies.
The stored request shows it, so no sample hides how it was asked.
"""

from __future__ import annotations

from contextlib import contextmanager

from cardproof.daemon.backends.openai import OpenAICompatBackend

EXTRA = {"ignore_eos": True}


@contextmanager
def fixed_length():
    original = OpenAICompatBackend.request_body

    def request_body(self, model, prompt, max_tokens, reasoning, extra):
        return original(self, model, prompt, max_tokens, reasoning, {**EXTRA, **(extra or {})})

    OpenAICompatBackend.request_body = request_body
    try:
        yield
    finally:
        OpenAICompatBackend.request_body = original
