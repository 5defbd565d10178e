"""Backends: one module per kind of model server, each defining ``BACKEND``, a :class:`~.interface.Backend`.

``BACKENDS`` is built from those modules (in ``Backend.order``); campaign
validation reads the names and each backend's ``options`` from it. Adding a
server kind is adding its module.

In short, ``backends/``: one module per server kind (``llamaserver``, ``ollama``,
``llamaswap``, ``openai``) implementing ``backends/interface.py``, over shared HTTP plumbing
(``http.py``: one ``chat_raw`` for every backend; no connection kept alive between requests, since
llama-server's router drops idle ones as the next request goes out (status polls apart: the router's
``GET /models`` before each measured request goes through ``StatusPoller``, one kept-alive stdlib
``http.client`` connection that asks once more on a fresh one when the server closed it, a third of
httpx's cost per poll; the other backends' polls read a failed poll as unknown); plain-HTTP clients
skip the certificate store and HTTPS ones share one context (``tls_verify``); streams read by
httpx-sse's ``EventSource`` inside a 16M-character budget; ``/metrics`` read by
``prometheus_client``'s text parser; Ollama's newline-delimited JSON split by hand, reason in the
code); every answer is checked field by field (``campaign/validate.py``, ``shapes.py``) and a malformed one
becomes an exception sample
"""

from __future__ import annotations

import os

from cardproof.registry import declared
from .base import BackendError, LoadResult, SampleResult
from .interface import Backend, LoadWatch
from .openai import OpenAICompatBackend

#: modules of this package that are plumbing shared by the backends
_NOT_BACKENDS = {"base", "evidence", "http", "interface", "shapes", "validate"}

#: kind -> class, in the order campaign errors list them
BACKENDS: dict[str, type[Backend]] = declared(__name__, __path__, _NOT_BACKENDS, "BACKEND", Backend, key="kind")


def taking(option: str) -> list[str]:
    """The kinds of backend that take the campaign option ``option`` (e.g. ``num_ctx``)."""
    return [kind for kind, cls in BACKENDS.items() if option in cls.options]


def make_backend(kind: str, url: str, timeout_s: float, **options) -> Backend:
    """Instantiate the backend registered under ``kind``.

    ``options`` (e.g. Ollama's ``num_ctx``) reach only the backends that take
    them; an option left unset (None) is not passed, so the server's own
    default applies and is recorded rather than overridden.
    """
    cls = BACKENDS[kind]
    kwargs = {k: v for k, v in options.items() if k in cls.options and v is not None}
    return cls(url, timeout_s=timeout_s, **kwargs)


def backend_for(campaign) -> Backend:
    """The backend a campaign names, with the options it sets (API key read from its variable)."""
    key = os.environ.get(campaign.api_key_env) if campaign.api_key_env else None
    return make_backend(campaign.backend, campaign.url, campaign.request_timeout_s,
                        num_ctx=campaign.num_ctx, api_key=key)


__all__ = ["BACKENDS", "Backend", "BackendError", "LoadResult", "LoadWatch", "OpenAICompatBackend", "SampleResult", "backend_for",
           "make_backend", "taking"]
