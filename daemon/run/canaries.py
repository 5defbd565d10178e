"""Canaries: one deliberate provocation per gate, to prove each gate can fire.

Each canary is a real request against the real server, stored as a sample
of kind ``canary`` in a cell of its own, so it never reaches a median. A gate
that cannot be provoked against this server is judged on a recorded
response taken from a published log, and marked ``recorded``.

What each canary sends lives with its gate (``Gate.canary`` in
``daemon/gates/<name>.py``); this module runs them, in ``Canary.order``,
through a :class:`CanaryRun` that makes their cells, samples and plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cardproof.daemon.run import cellchecks
from cardproof.daemon.backends import Backend, BackendError
from cardproof.daemon.gates import GATES
from cardproof.daemon.server.prompts import build_prompt
from cardproof.daemon.store.said import Saying, english, said_json
from cardproof.daemon.run.sampling import SampleRequest, Taken, take_sample
from cardproof.daemon.store import Store, dumps, utcnow


@dataclass
class CanaryRun:
    """One model's canaries: what a gate's ``provoke`` may use to send, store and plan."""

    store: Store
    backend: Backend
    run_id: int
    model: str
    model_id: int
    position: int
    echo: Callable[[str], None]
    short_tokens: int  # the campaign's short prompt
    allow_evict: bool = True  # never for the pinned model
    load_id: int | None = None
    eos: int | None = None  # the end-of-sequence token id, where the server names it

    def new_cell(self, gate: str, max_tokens: int = 8) -> int:
        """A cell of its own for ``gate``'s canary: never part of a measured cell or median."""
        return self.store.insert(
            "cells",
            {"run_id": self.run_id, "model_id": self.model_id, "position": self.position, "prompt_class": "short",
             "reasoning": 0, "max_tokens": max_tokens, "repetitions": 1, "pinned": 0,
             "kind": "canary", "canary_gate": gate},
        )

    def sample(self, gate: str, *, max_tokens: int = 8, extra: dict | None = None, client=None,
               nonce: str | None = None, cell_id: int | None = None, rep: int = 1) -> tuple[int, Taken]:
        """One canary request (in a new cell unless ``cell_id``); returns the cell and what was taken."""
        cid = cell_id or self.new_cell(gate, max_tokens)
        taken = take_sample(self.store, self.backend, SampleRequest(
            self.run_id, cid, self.model_id, self.model, rep, lambda n: build_prompt(self.short_tokens, n),
            max_tokens, reasoning=False, kind="canary", extra=extra, client=client, nonce=nonce, load_id=self.load_id,
        ))
        self.echo(f"canary {gate}: {taken.text}")
        return cid, taken

    def snapshot(self, cell_id: int, phase: str, *, embedding_url: str | None = None) -> None:
        """The server's counters (and an embedding probe, where given) around a canary's cell."""
        cellchecks.snapshot(self.store, self.backend, cell_id, self.model, phase, embedding_url=embedding_url,
                            embedding_model=None)

    def plan(self, gate: str, *, sample_id=None, result=None, reason: "Saying | None" = None, detail=None) -> None:
        """The canary's row: its sample, or why it was not run; the judge settles its verdict."""
        self.store.insert(
            "canaries",
            {"run_id": self.run_id, "gate": gate, "sample_id": sample_id, "result": result,
             "reason": english(reason), "reason_json": _said(reason),
             "detail_json": dumps(detail) if detail is not None else None, "at": utcnow()},
        )


def _said(reason: "Saying | None") -> str | None:
    """The stored form of a reason beside its English (None: prose only, shown quoted)."""
    structured = said_json(reason)
    return None if structured is None else dumps(structured)


def run_canaries(store: Store, backend: Backend, campaign, run_id: int, model: str, model_id: int, *,
                 position: int, echo: Callable[[str], None], allow_evict: bool = True,
                 load_id: int | None = None) -> None:
    """Provoke every gate once on ``model``; eviction only where ``allow_evict`` (never a pin)."""
    run = CanaryRun(store, backend, run_id, model, model_id, position, echo,
                    short_tokens=campaign.prompt_tokens.get("short", 40), allow_evict=allow_evict, load_id=load_id)
    try:
        eos_text = backend.server_info(model).get("eos_token")
        run.eos = backend.token_id(model, eos_text) if eos_text else None
    except BackendError:
        pass
    for gate in sorted((g for g in GATES.values() if g.canary), key=lambda g: g.canary.order):
        gate.canary.provoke(run)
