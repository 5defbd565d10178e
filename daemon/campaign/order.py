"""The order a run measures its models' main cells in, and why.

Measured in blocks -- every repetition of one model, then the next model's --
a change of the machine's speed during the run (another process, heat, the
host) falls on one model and not on the others, and a difference between the
models cannot be told from a difference between moments. So the runner
interleaves the repetitions across the models (round-robin: repetition 1 of
each model in turn, then repetition 2, ...) wherever that costs no load per
sample: a llama-server router that keeps at least as many models loaded as
the campaign measures (``max_instances`` in its ``/props``). Elsewhere (a
router keeping fewer, a server that does not say how many it keeps) the
models stay in blocks, and the article says why.

The decision reads only what the run stores (the backend kind and the
server's ``/props``), so the report states the same reason from the rows.
"""

from __future__ import annotations

from cardproof.daemon.store.said import Said


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def interleave(kind: str | None, props: dict | None, models: int) -> tuple[bool, Said]:
    """Whether the main cells' repetitions may be interleaved across ``models`` models, and why (a reason
    that reads after "because")."""
    props = props if isinstance(props, dict) else {}
    if models <= 1:
        return False, Said("only one model is measured")
    if kind == "llama-server" and props.get("role") == "router":
        kept = _whole(props.get("max_instances"))
        if kept is None:
            return False, Said("the router does not say how many models it keeps loaded (no max_instances in "
                               "its /props)")
        if kept >= models:
            return True, Said("the router keeps all {models} models measured loaded at once (up to {kept}: "
                              "max_instances in its /props)", {"kept": kept, "models": models})
        return False, Said("the router keeps at most {kept} of the {models} models measured loaded at once "
                           "(max_instances in its /props): interleaving would load a model again before every "
                           "sample", {"kept": kept, "models": models})
    return False, Said("the {backend} server does not say how many models it keeps loaded at once",
                       {"backend": kind or "?"})
