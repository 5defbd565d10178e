"""The runner's loads: models registered, loaded one at a time (or refused beside the pin), and stored.

Before every load other than the pin's, free memory is read from the card and
compared with the model's need (``memory.budget.pin_guard``); a load that
would not fit is refused and its cell's samples are stored as never sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlparse

import time

from cardproof.daemon.server import modelfile
from cardproof.daemon.backends import BackendError
from cardproof.daemon.store.crashes import describe_end, router_died
from cardproof.daemon.memory.budget import pin_guard
from cardproof.daemon.memory.procinfo import children, listening_pids, pids_with_arg
from cardproof.daemon.server.prompts import new_nonce
from cardproof.daemon.store import utcnow

if TYPE_CHECKING:
    from cardproof.daemon.run.context import RunContext


def register_models(ctx: RunContext) -> dict[str, int]:
    ids = {}
    listed = {}
    try:
        listed = {m.get("id"): m for m in ctx.backend.models()}
    except BackendError:
        pass
    for spec in ctx.campaign.models:
        path = spec.file or model_path_from_args(listed.get(spec.name))
        row = modelfile.describe(spec.name, path)
        try:  # Ollama: digest, quantisation, capabilities from its API
            described = ctx.backend.describe_model(spec.name)
        except BackendError:
            described = None
        if described is not None:
            row = {**described, **{k: v for k, v in row.items() if v is not None}}
        ids[spec.name] = ctx.store.upsert_model(row)
    return ids


def model_path_from_args(entry: dict | None) -> str | None:
    """The router lists each model's command line; its ``--model`` is the file."""
    if not entry:
        return None
    if entry.get("path"):
        return entry["path"]
    args = (entry.get("status") or {}).get("args") or []
    for flag in ("--model", "-m"):
        if flag in args and args.index(flag) + 1 < len(args):
            return args[args.index(flag) + 1]
    return None


def load_for_cell(ctx: RunContext, name: str, pin: str | None, refused: dict[str, str]) -> int | None:
    """Load the next model, unless the pinned-model rule keeps it off the cards (then ``refused`` says why)."""
    model_id = ctx.model_ids[name]
    guarded = pin is not None and name != pin
    reason = pin_guard(ctx.store, ctx.mem, model_id, name, pin) if guarded else None
    if reason is None:
        return explicit_load(ctx, name, checked=guarded)
    refused[name] = reason
    ctx.echo(f"load {name}: refused: {reason}")
    return ctx.store.insert("loads", {"run_id": ctx.run_id, "model_id": model_id, "trigger": "explicit",
                                      "requested_at": utcnow(), "status": "refused", "error_text": reason})


def free_router(ctx: RunContext, names: list[str], who: str) -> None:
    """Unload ``names`` from the campaign's server where it is a router, so the card holds what ``who`` (the
    variants, the fit test) loads next and not the run's models as well; the pin is not among ``names``."""
    try:
        if not ctx.backend.is_router():
            return
        for name in names:
            if ctx.backend.model_status(name) == "loaded":
                ctx.backend.unload(name)
    except Exception as exc:  # noqa: BLE001 -- the step still runs; the free memory it reads says the rest
        ctx.echo(f"{who}: could not unload the run's models from the server: {exc}")


def samples_not_sent(store, run_id: int, cell_id: int, reps: int, load_id: int | None, kind: str,
                     reason: str) -> int:
    """A cell whose model was refused or never loaded: its samples stored as exceptions never sent, with
    the reason (any request would have loaded the model after all). Returns how many."""
    for rep in range(1, reps + 1):
        store.insert("samples", {
            "run_id": run_id, "cell_id": cell_id, "repetition": rep, "nonce": new_nonce(),
            "started_at": utcnow(), "kind": "measure", "load_id": load_id, "error_kind": kind,
            "error_text": reason[:2000], "counter_source": "none"})
    return reps


def explicit_load(ctx: RunContext, name: str, *, checked: bool = False) -> int | None:
    """Load ``name`` and store the load; ``checked``: the pin guard has already read the card's free memory."""
    store, backend, mem, model_id = ctx.store, ctx.backend, ctx.mem, ctx.model_ids[name]
    if mem is not None and not checked:
        # free memory read from the card right before the load, never inferred
        mem.before_load(model_id)
    try:
        res = backend.load(name)
    except BackendError as exc:
        ctx.echo(f"load {name}: failed: {exc}")
        return store.insert(
            "loads",
            {"run_id": ctx.run_id, "model_id": model_id, "trigger": "explicit", "requested_at": utcnow(),
             "status": "failed", "error_text": str(exc)},
        )
    if res.status == "already_loaded" and not backend.is_router():
        return None  # single-model server: the load happened before the run
    ctx.echo(
        f"load {name}: {res.status}"
        + (f" in {res.load_seconds:.2f} s" if res.load_seconds else "")
        + (f" ({res.error_text})" if res.error_text else "")
    )
    load_id = store.insert(
        "loads",
        {
            "run_id": ctx.run_id,
            "model_id": model_id,
            "trigger": "explicit",
            "requested_at": res.requested_at,
            "ready_at": res.ready_at,
            "load_seconds": res.load_seconds,
            "status": res.status,
            "error_text": res.error_text,
            "port": res.port,
            "pid": res.pid,
        },
    )
    model_file = backend.model_blob(name)  # Ollama: the weights file its runner is started with
    if model_file is not None:  # for linking the log's loads
        store.update("loads", load_id, {"model_file": model_file})
    if mem is not None and res.status in ("loaded", "already_loaded"):
        pid = res.pid
        if backend.is_router() and not pid:  # a router's child: found by its model on the listening port
            pid = router_child_pid(backend.url, name)
        if pid and not res.pid:
            store.update("loads", load_id, {"pid": pid})
        mem.after_load(load_id, pid=pid, arg=backend.runner_arg(name))
    return load_id


def note_crash(ctx: RunContext, load_id: int | None, name: str, *, wait_s: float = 0.5) -> str | None:
    """After a request failed: whether the process serving ``name`` died under it; if so its load ends crashed.

    A router notices a dead child within about 50 ms of its output closing, so it is asked for up to
    ``wait_s``; a child still running after that was not what failed. Returns the ``end_reason``.
    """
    if load_id is None:
        return None
    try:
        if not ctx.backend.is_router():
            return None
    except BackendError:  # a server that refuses or no longer answers its listing names no child that died
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            code = ctx.backend.process_exit(name)
        except BackendError:
            return None
        if code is not None or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if code is None:
        return None
    reason = router_died(code)
    ctx.store.update("loads", load_id, {"ended_at": utcnow(), "end_reason": reason, "exit_status": code})
    ctx.echo(f"load {load_id} ({name}): the server process died: {describe_end(reason)}")
    return reason


def router_child_pid(url: str, name: str) -> int | None:
    """The PID of the router's child serving ``name``, when the router runs on this host.

    The router names each child after its model (``--alias NAME``); only
    children of the process listening on the campaign's port count, so
    another router on the same machine serving the same name is never taken.
    """
    parsed = urlparse(url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1") or not parsed.port:
        return None
    routers = listening_pids(parsed.port)
    mine = {c for r in routers for c in children(r)}
    found = [p for p in pids_with_arg(name) if p in mine]
    return found[0] if len(found) == 1 else None
