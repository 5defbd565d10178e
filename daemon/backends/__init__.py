"""Backends: one class per kind of model server, registered in BACKENDS."""

from __future__ import annotations

from .base import BackendError, LoadResult, SampleResult
from .llamaserver import LlamaServerBackend

BACKENDS = {"llama-server": LlamaServerBackend}


def make_backend(kind: str, url: str, timeout_s: float):
    """Instantiate the backend registered under ``kind``."""
    return BACKENDS[kind](url, timeout_s=timeout_s)


__all__ = ["BACKENDS", "BackendError", "LoadResult", "SampleResult", "make_backend"]
