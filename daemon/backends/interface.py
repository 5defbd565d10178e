"""The one interface a model server is reached through.

The runner, the canaries, the probes, the cell checks and the daemon's quiet
window ask a backend only what :class:`Backend` declares. A server that
cannot do something answers the declared way -- an optional capability's
default (``None``), or :func:`http.not_supported` (an HTTP 501
``BackendError``) -- instead of lacking the method, so no caller ever probes
for an attribute.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

import httpx

from .base import LoadResult, SampleResult
from .http import StatusPoller, make_client


class LoadWatch(Protocol):
    """A load noticed inside a measured request (``Backend.watch_load``)."""

    load_seen: bool
    load_seconds: float | None
    requested_at: str
    ready_at: str | None
    port: int | None

    def stop(self, settle_s: float = 2.0) -> None: ...


class Backend(ABC):
    """A kind of model server: its module's ``BACKEND``, registered by ``kind`` in ``backends.BACKENDS``.

    ``options`` are the campaign's ``[server]`` settings this backend takes as
    keyword arguments (``make_backend`` passes no others); campaign validation
    reads them from the registry.
    """

    kind: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()
    order: ClassVar[int] = 1000  # place in BACKENDS, and in the campaign error that lists them

    def __init__(self, url: str, *, timeout_s: float = 300.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.client = make_client(self.url, timeout_s)
        self._side: httpx.Client | None = None
        self._poller: StatusPoller | None = None

    def close(self) -> None:
        self.client.close()
        if self._side is not None:
            self._side.close()
        if self._poller is not None:
            self._poller.close()

    def side_client(self) -> httpx.Client:
        """A second client for polling beside a running request (made once, with the same login)."""
        if self._side is None:
            self._side = make_client(self.url, 5.0, keep_alive=True)  # polls: a failed one reads as unknown
            self._side.headers.update(self.login_headers())
        return self._side

    def login_headers(self) -> dict[str, str]:
        """The client's ``authorization`` header (its login), for the other clients that speak for it."""
        return {k: v for k, v in self.client.headers.items() if k.lower() == "authorization"}

    def status_poller(self) -> StatusPoller:
        """A light kept-alive connection for the status polls around each measured request (made once)."""
        if self._poller is None:
            self._poller = StatusPoller(self.url, 5.0, self.login_headers())
        return self._poller

    # -- what the server says about itself -----------------------------------
    @abstractmethod
    def models(self) -> list[dict]:
        """The models the server lists, each with an ``id``."""

    @abstractmethod
    def is_router(self) -> bool:
        """Whether the server loads and unloads models itself (router, swap proxy, Ollama)."""

    @abstractmethod
    def model_status(self, name: str) -> str | None:
        """``loaded``/``loading``/``unloaded``/...; None where the server does not say."""

    @abstractmethod
    def server_info(self, model: str | None = None) -> dict:
        """The server's self-description (build, version, ``eos_token``, ...), stored with the run."""

    @abstractmethod
    def metrics(self, model: str | None = None) -> dict:
        """Prometheus counters; ``not_supported`` where the server has none."""

    @abstractmethod
    def token_id(self, model: str, text: str) -> int | None:
        """The id of a special token (the canaries force end-of-sequence); None where unknown."""

    # -- loads ---------------------------------------------------------------
    @abstractmethod
    def load(self, name: str, **kwargs) -> LoadResult:
        """Load ``name`` and time it, or say it was already loaded."""

    @abstractmethod
    def unload(self, name: str) -> None:
        """Unload ``name`` (canaries only, never the pinned model); ``not_supported`` where impossible."""

    @abstractmethod
    def watch_load(self, name: str) -> LoadWatch:
        """Notice and time a load that happens inside the next request."""

    # -- requests ------------------------------------------------------------
    @abstractmethod
    def chat(self, model: str, prompt: str, *, max_tokens: int, reasoning: bool, extra: dict | None = None,
             client: httpx.Client | None = None) -> SampleResult:
        """One measured, streamed request; ``client`` lets a canary speak from another address."""

    @abstractmethod
    def chat_raw(self, model: str, body: dict, *, timeout_s: float | None = None) -> dict:
        """One non-streamed ``/v1/chat/completions`` with a caller-built body (probes); not a measurement."""

    # -- optional capabilities: the default is the answer of a server without them --
    def describe_model(self, name: str) -> dict | None:
        """Columns for the ``models`` row from the server's own records (Ollama); None: it keeps none."""
        return None

    def model_blob(self, name: str) -> str | None:
        """The weights file the server's runner is started with (Ollama), for linking its log's loads."""
        return None

    def runner_arg(self, name: str) -> str | None:
        """An argument on the command line of the process serving ``name``, for finding it in /proc."""
        return None

    def count_tokens(self, model: str, text: str) -> int | None:
        """How many tokens ``text`` is in ``model``'s own tokenizer (no special tokens added); None where the
        server offers no tokenizer (the coding probe then estimates its budgets from characters)."""
        return None

    def model_card(self, name: str) -> dict | None:
        """The server's own record of a model's capabilities (Ollama's ``/api/show``); None: it has none."""
        return None

    def process_exit(self, name: str) -> int | None:
        """The failing exit status the server reports for the process that served ``name`` (llama-server's
        router: ``/models`` ``exit_code`` with ``failed``); None while it runs, or where the server keeps none."""
        return None
