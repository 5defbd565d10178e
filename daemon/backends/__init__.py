"""Backends: one class per kind of model server, registered in BACKENDS."""

from __future__ import annotations

from .base import BackendError, LoadResult, SampleResult
from .llamaserver import LlamaServerBackend
from .llamaswap import LlamaSwapBackend
from .ollama import OllamaBackend
from .openai import OpenAICompatBackend

BACKENDS = {
    "llama-server": LlamaServerBackend,
    "ollama": OllamaBackend,
    "llama-swap": LlamaSwapBackend,
    "openai": OpenAICompatBackend,
}

# Campaign options each backend accepts (``[server]`` keys beyond backend/url).
OPTIONS = {"ollama": ("num_ctx",), "llama-swap": ("api_key",), "openai": ("api_key",)}


def make_backend(kind: str, url: str, timeout_s: float, **options):
    """Instantiate the backend registered under ``kind``.

    ``options`` (e.g. Ollama's ``num_ctx``) reach only the backends that take
    them; an option left unset (None) is not passed, so the server's own
    default applies and is recorded rather than overridden.
    """
    accepted = OPTIONS.get(kind, ())
    kwargs = {k: v for k, v in options.items() if k in accepted and v is not None}
    return BACKENDS[kind](url, timeout_s=timeout_s, **kwargs)


def backend_for(campaign):
    """The backend a campaign names, with the options it sets (API key read from its variable)."""
    import os

    key = os.environ.get(campaign.api_key_env) if getattr(campaign, "api_key_env", None) else None
    return make_backend(campaign.backend, campaign.url, campaign.request_timeout_s,
                        num_ctx=getattr(campaign, "num_ctx", None), api_key=key)


__all__ = ["BACKENDS", "BackendError", "LoadResult", "SampleResult", "backend_for", "make_backend"]
