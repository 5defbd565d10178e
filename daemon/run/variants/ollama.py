"""An Ollama variant: the model's own name on the wire, the variant's settings as request options.

Ollama starts its runner itself; what it lets a client vary per model is a
few request options (``num_thread``, ``num_batch``, ``num_gpu``, ``num_ctx``).
A runner loaded with other options is another load: Ollama reloads when a
request's options differ from the running runner's, so every request of the
variant -- its load included -- carries the same options, or the
measurement would time reloads. The run asks for ``base~variant``; this
backend sends ``base`` with the options.
"""

from __future__ import annotations

from cardproof.daemon.backends.ollama import OllamaBackend


class OllamaVariantBackend(OllamaBackend):
    """:class:`OllamaBackend` that serves each variant name as its base model with the variant's options."""

    kind = "ollama"

    def __init__(self, url: str, *, timeout_s: float = 300.0, num_ctx: int | None = None,
                 served: dict[str, str] | None = None, options: dict | None = None):
        super().__init__(url, timeout_s=timeout_s, num_ctx=num_ctx)
        self.served = dict(served or {})
        self.variant_options = dict(options or {})

    def _real(self, name):
        return self.served.get(name, name)

    def _options(self, **more) -> dict:
        # the variant's num_ctx wins over the campaign's; every request carries them, or Ollama reloads
        return super()._options(**more) | self.variant_options

    def show(self, model: str) -> dict:
        return super().show(self._real(model))

    def describe_model(self, name: str) -> dict:
        return super().describe_model(self._real(name)) | {"name": name}

    def model_status(self, name: str) -> str | None:
        return super().model_status(self._real(name))

    def server_info(self, model: str | None = None) -> dict:
        info = super().server_info(self._real(model) if model else None)
        return info | {"variant_options": dict(self.variant_options)}

    def load(self, name: str, **kwargs):
        return super().load(self._real(name), **kwargs)

    def unload(self, name: str) -> None:
        super().unload(self._real(name))

    def watch_load(self, name: str):
        return super().watch_load(self._real(name))

    def chat_raw(self, model: str, body: dict, *, timeout_s: float | None = None) -> dict:
        return super().chat_raw(self._real(model), body | {"model": self._real(model)}, timeout_s=timeout_s)

    def chat(self, model: str, prompt: str, **kwargs):
        return super().chat(self._real(model), prompt, **kwargs)
