"""The answer shapes the backends read, checked field by field (see :mod:`validate`).

OpenAI-style chunks (streamed ``delta`` or a whole ``message``), llama.cpp's
``timings``, OpenAI ``usage`` and Ollama's final stream object. Each reader
returns plain values or raises ``BackendError("protocol", ...)`` naming the
field and what the server sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from .validate import MAX_NS, as_list, as_object, as_text, count, number, obj


@dataclass
class Piece:
    """What one choice of one chunk added."""

    content: str
    reasoning: str
    finish_reason: str | None


def chunk_pieces(chunk: dict) -> list[Piece]:
    """The text each choice of an OpenAI-style chunk carries (streamed ``delta`` or whole ``message``)."""
    out = []
    for i, choice in enumerate(as_list(chunk.get("choices"), "choices") or []):
        where = f"choices[{i}]"
        choice = as_object(choice, where, required=True)
        part = "delta" if "delta" in choice else "message"
        body = as_object(choice.get(part), f"{where}.{part}") or {}
        content = as_text(body.get("content"), f"{where}.{part}.content") or ""
        # llama-server and older vLLM: reasoning_content; newer vLLM, LM Studio: reasoning
        reasoning = (as_text(body.get("reasoning_content"), f"{where}.{part}.reasoning_content")
                     or as_text(body.get("reasoning"), f"{where}.{part}.reasoning") or "")
        finish = as_text(choice.get("finish_reason"), f"{where}.finish_reason")
        out.append(Piece(content, reasoning, finish))
    return out


def timings_counters(final: dict) -> dict:
    """SampleResult fields from llama.cpp's ``timings`` (``usage`` fills counts it lacks).

    The counts llama.cpp always prints are required; a rate may be null
    (llama.cpp writes a division by zero as null) and then reads as None.
    """
    obj(final, "timings", required=True)
    usage = usage_counts(final)
    prompt = count(final, "timings.prompt_n")
    # a server that passes timings without predicted_n may still count in usage
    generated = count(final, "timings.predicted_n", required="completion_tokens" not in usage)
    return dict(
        prompt_tokens=prompt if prompt is not None else usage.get("prompt_tokens"),
        generated_tokens=generated if generated is not None else usage.get("completion_tokens"),
        prompt_ms=number(final, "timings.prompt_ms"),
        predicted_ms=number(final, "timings.predicted_ms"),
        prefill_tps=number(final, "timings.prompt_per_second"),
        decode_tps=number(final, "timings.predicted_per_second"),
        draft_tokens=count(final, "timings.draft_n"),
        draft_accepted=count(final, "timings.draft_n_accepted"),
        cached_tokens=count(final, "timings.cache_n"),
    )


def usage_counts(final: dict) -> dict:
    """OpenAI ``usage``: prompt, completion and cached prompt tokens (absent ones left out)."""
    if obj(final, "usage") is None:
        return {}
    out = {
        "prompt_tokens": count(final, "usage.prompt_tokens"),
        "completion_tokens": count(final, "usage.completion_tokens"),
        "cached_tokens": count(final, "usage.prompt_tokens_details.cached_tokens"),
    }
    return {k: v for k, v in out.items() if v is not None}


def ollama_final(final: dict) -> dict:
    """Ollama's last stream object: counts and nanosecond durations, checked.

    Returns ``prompt_eval_count``, ``eval_count``, ``prompt_eval_duration``,
    ``eval_duration``, ``load_duration`` (None where absent) and
    ``done_reason``.
    """
    out = {k: count(final, k) for k in ("prompt_eval_count", "eval_count")}
    for k in ("prompt_eval_duration", "eval_duration", "load_duration", "total_duration"):
        out[k] = number(final, k, integer=True, high=MAX_NS)
    out["done_reason"] = as_text(final.get("done_reason"), "done_reason")
    return out

