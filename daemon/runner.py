"""The runner: plan cells, load each model once, measure, store as it goes.

Status, exit code and coverage are written by the runner itself (principle
10): nothing later reconstructs them.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlparse

from . import cellchecks, hostinfo, liveness, modelfile
from .backends import BackendError, backend_for, evidence
from .campaign import Campaign
from .canaries import run_canaries
from .judge import judge_run
from .logs import LogSourceError, attribute_run, capture_file, capture_journal
from .logs.requests import cache_from_logs
from .memory.budget import pin_guard
from .memory.capture import MemoryCapture
from .memory.procinfo import children, listening_pids, pids_with_arg
from .probes.run import run_model_probes
from .prompts import build_prompt, new_nonce
from .redact import public_url
from .rules.outcome import evaluate_rules
from .sampling import take_sample
from .store import Store, StoreError, dumps, utcnow

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 130


@dataclass
class PlannedCell:
    model: str
    prompt_class: str
    reasoning: bool
    repetitions: int
    pinned: bool


@dataclass
class RunOutcome:
    run_id: int
    status: str
    exit_code: int
    planned: int
    measured: int
    failed: int

    @property
    def coverage(self) -> float:
        return self.measured / self.planned if self.planned else 0.0


def plan_cells(campaign: Campaign) -> list[PlannedCell]:
    """All cells in the order that needs the fewest loads.

    One model at a time; the pinned (production) model goes last so that it
    is never unloaded in the middle of the campaign (principle 12).
    """
    models = sorted(campaign.models, key=lambda m: m.pinned)
    cells = []
    for m in models:
        for reasoning in sorted(campaign.reasoning):
            for cls in campaign.prompt_classes:
                cells.append(PlannedCell(m.name, cls, reasoning, campaign.repetitions_for(reasoning), m.pinned))
    return cells


def register_campaign(store: Store, campaign: Campaign) -> int:
    """Freeze the campaign text, its SHA-256 and the time (principle 7)."""
    return store.insert(
        "campaigns",
        {
            "name": campaign.name,
            "path": campaign.path,
            "sha256": campaign.sha256,
            "toml_text": campaign.text,
            "registered_at": utcnow(),
        },
    )


class _Interrupted(Exception):
    pass


def run_campaign(
    store: Store,
    campaign: Campaign,
    *,
    echo: Callable[[str], None] = print,
    backend=None,
    memory_source=None,
) -> RunOutcome:
    """Run ``campaign`` against its server, storing every sample as it is taken.

    ``memory_source`` replaces the NVML reader (tests: recorded readings).
    """
    own_backend = backend is None
    backend = backend or backend_for(campaign)
    try:
        # held until the run's status is written; any other end leaves it unlocked: proof of an unfinished run
        with liveness.RunLock(store.path) as lock:
            return _run(store, campaign, backend, echo, memory_source, lock)
    finally:
        if own_backend:
            backend.close()


def _run(store: Store, campaign: Campaign, backend, echo, memory_source=None, lock=None) -> RunOutcome:
    try:
        gone = liveness.reconcile_runs(store, by=f"cardproof run (pid {os.getpid()})")
    except Exception as exc:  # noqa: BLE001 -- another run's death must never stop this one
        gone = []
        echo(f"warning: runs whose process is gone not marked interrupted: {type(exc).__name__}: {exc}")
    for g in gone:
        echo(f"run {g['run_id']} marked interrupted: {g['why']} ({g['measured']}/{g['planned']} samples)")
    campaign_id = register_campaign(store, campaign)
    cells = plan_cells(campaign)
    planned = sum(c.repetitions for c in cells)
    identity = liveness.this_process()
    run_id = store.insert(
        "runs",
        {
            "campaign_id": campaign_id,
            **identity,
            "host": hostinfo.host_name(),
            "gpus_json": dumps(hostinfo.gpu_inventory()),
            "backend": campaign.backend,
            "server_url": public_url(campaign.url),  # shown in the article: no login
            "started_at": utcnow(),
            "status": "running",
            "samples_planned": planned,
            "samples_measured": 0,
            "samples_failed": 0,
        },
    )
    if lock is not None:
        lock.bind(run_id, identity)
        if lock.warning:
            echo(f"warning: {lock.warning}")
    echo(f"run {run_id}: campaign {campaign.name} ({campaign.sha256[:12]}), {len(cells)} cells, {planned} samples planned")
    state = {"measured": 0, "failed": 0}

    logs_done = []
    notes: list[str] = []  # what failed after the measurements: kept on the run, beside its real status

    def capture_once() -> None:
        if not logs_done:
            logs_done.append(True)
            problem = _capture_logs(store, campaign, run_id, echo)
            if problem:
                notes.append(problem)

    def finish(status: str, code: int, error: str | None = None) -> RunOutcome:
        capture_once()
        store.update(
            "runs",
            run_id,
            {
                "ended_at": utcnow(),
                "status": status,
                "exit_code": code,
                "samples_measured": state["measured"],
                "samples_failed": state["failed"],
                "coverage": state["measured"] / planned if planned else 0.0,
                "error_text": "; ".join(filter(None, [error, *notes])) or None,
            },
        )
        if lock is not None:
            lock.release(finished=True)
        return RunOutcome(run_id, status, code, planned, state["measured"], state["failed"])

    def on_term(signum, frame):
        raise _Interrupted(f"signal {signum}")

    old = None
    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not in the main thread
        pass
    try:
        try:
            props = backend.server_info()
        except BackendError as exc:
            echo(f"error: server {public_url(campaign.url)} not reachable: {exc}")
            return finish("failed", EXIT_FAILED, f"server not reachable: {exc}")
        store.update(
            "runs",
            run_id,
            {
                "server_version": str(props.get("build_info") or props.get("version") or ""),
                "server_build": str(props.get("build_info") or ""),
                "server_props_json": dumps(props),
            },
        )
        if campaign.log_file:
            try:  # lines from before the run are kept, but belong to no run
                capture_file(store, campaign.log_file)
            except (LogSourceError, StoreError) as exc:
                echo(f"warning: log capture: {exc}")
        model_ids = _register_models(store, campaign, backend)
        mem = MemoryCapture(store, run_id, source=memory_source).start()
        echo(mem.status_line())
        try:
            _run_cells(store, campaign, backend, run_id, cells, model_ids, state, echo, planned, mem)
        finally:
            mem.stop()
    except (KeyboardInterrupt, _Interrupted) as exc:
        echo(f"run {run_id} interrupted ({exc or 'keyboard'}); {state['measured']}/{planned} samples stored")
        return finish("interrupted", EXIT_INTERRUPTED, f"interrupted: {exc or 'keyboard interrupt'}")
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    capture_once()  # before judging: gates read the load facts from the log
    filled = cache_from_logs(store, run_id)  # servers without a cache counter (Ollama): the log's task lines
    if filled:
        echo(f"prompt cache: cached tokens of {filled} samples read from the server log")
    evidence.record_runtime_selfreports(store, run_id)  # Ollama's /api/ps figure per load
    fired = judge_run(store, run_id, campaign.gates)
    echo("gates: " + (", ".join(f"{g} fired on {n}" for g, n in sorted(fired.items())) or "none fired"))
    if campaign.rules:  # after judging: rules read medians of the samples the gates let through
        evaluate_rules(store, run_id, echo)
    code = EXIT_OK if state["measured"] == planned else EXIT_PARTIAL
    outcome = finish("completed", code)
    echo(
        f"run {run_id} completed: {outcome.measured}/{planned} samples measured "
        f"({outcome.coverage:.0%} coverage), {outcome.failed} exceptions"
    )
    return outcome


def _capture_logs(store: Store, campaign: Campaign, run_id: int, echo) -> str | None:
    """Bring the server's log lines of this run into the store and link them to its loads.

    A failing capture, whatever the cause (a locked or full database, an
    unreadable log, a bug), is a note on the run -- returned, for the run's
    error_text -- never a lost run: its status, gates and rules come after.
    """
    if not (campaign.log_file or campaign.journal_unit):
        return None
    try:
        run = store.db["runs"].get(run_id)
        if campaign.log_file:
            stats = capture_file(store, campaign.log_file, run_id=run_id)
            echo(f"log {campaign.log_file}: {stats.get('lines', stats)} lines captured")
        if campaign.journal_unit:
            capture_journal(store, campaign.journal_unit, run_id=run_id, since=run["started_at"])
        linked = attribute_run(store, run_id)
        echo(f"log lines linked to {len(linked.get('matched', []))} loads")
    except Exception as exc:  # noqa: BLE001 -- see the docstring
        if store.db.conn.in_transaction:  # half a capture is no capture: the run's own rows come next
            store.db.conn.rollback()
        known = isinstance(exc, (LogSourceError, StoreError))
        note = f"log capture failed: {exc}" if known else f"log capture failed: {type(exc).__name__}: {exc}"
        echo(f"warning: {note}")
        return note
    return None


def _register_models(store: Store, campaign: Campaign, backend) -> dict[str, int]:
    ids = {}
    listed = {}
    try:
        listed = {m.get("id"): m for m in backend.models()}
    except BackendError:
        pass
    for spec in campaign.models:
        path = spec.file or _model_path_from_args(listed.get(spec.name))
        row = modelfile.describe(spec.name, path)
        try:  # Ollama: digest, quantisation, capabilities from its API
            described = backend.describe_model(spec.name)
        except BackendError:
            described = None
        if described is not None:
            row = {**described, **{k: v for k, v in row.items() if v is not None}}
        ids[spec.name] = store.upsert_model(row)
    return ids


def _model_path_from_args(entry: dict | None) -> str | None:
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


def _run_cells(store, campaign, backend, run_id, cells, model_ids, state, echo, planned, mem):
    current_model = None
    load_id = None
    done = 0
    canaries_done = not campaign.canaries
    pin = next((m.name for m in campaign.models if m.pinned), None)
    refused: dict[str, str] = {}  # model -> why it was not loaded beside the pin
    for position, cell in enumerate(cells):
        leaving = current_model is not None and current_model not in refused  # loaded, so usable
        if campaign.probes and leaving and cell.model != current_model:
            # probes run on the model being left, while it is loaded: no load of their own
            run_model_probes(store, backend, campaign, run_id, current_model, model_ids[current_model], echo)
        if cell.pinned and not canaries_done and leaving:
            # canaries run before the pin is touched: they may evict a model
            run_canaries(store, backend, campaign, run_id, current_model, model_ids[current_model],
                         position=position, echo=echo, load_id=load_id)
            canaries_done = True
        cell_id = store.insert(
            "cells",
            {
                "run_id": run_id,
                "model_id": model_ids[cell.model],
                "position": position,
                "prompt_class": cell.prompt_class,
                "reasoning": int(cell.reasoning),
                "max_tokens": campaign.max_tokens,
                "repetitions": cell.repetitions,
                "pinned": int(cell.pinned),
                "kind": "measure",
            },
        )
        if cell.model != current_model:
            if load_id is not None:
                store.update("loads", load_id, {"ended_at": utcnow(), "end_reason": "next model"})
            load_id = _load_for_cell(store, backend, run_id, model_ids[cell.model], cell.model, pin, refused, echo, mem)
            current_model = cell.model
        if cell.model in refused:
            done += _refused_samples(store, run_id, cell_id, cell, load_id, refused[cell.model])
            state["failed"] += cell.repetitions
            echo(f"[{done}/{planned}] {cell.model} {cell.prompt_class}: {cell.repetitions} samples not taken (load refused)")
            continue
        checks = dict(embedding_url=campaign.embedding_url, embedding_model=campaign.embedding_model)
        cellchecks.snapshot(store, backend, cell_id, cell.model, "before", **checks)
        for rep in range(1, cell.repetitions + 1):
            done += 1
            label = (
                f"[{done}/{planned}] {cell.model} {cell.prompt_class} "
                f"reasoning={'on' if cell.reasoning else 'off'} rep {rep}/{cell.repetitions}"
            )
            taken = take_sample(
                store, backend, run_id=run_id, cell_id=cell_id, model_id=model_ids[cell.model],
                model=cell.model, repetition=rep,
                build_prompt=lambda nonce, n=campaign.prompt_tokens[cell.prompt_class]: build_prompt(n, nonce),
                max_tokens=campaign.max_tokens, reasoning=cell.reasoning, load_id=load_id,
            )
            if taken.load_id is not None:
                load_id = taken.load_id
                child = router_child_pid(backend.url, cell.model) if backend.is_router() else None
                if child:
                    store.update("loads", load_id, {"pid": child})
                mem.after_load(load_id, pid=child, arg=backend.runner_arg(cell.model))
            if taken.ok:
                state["measured"] += 1
            else:
                state["failed"] += 1
            echo(f"{label}: {taken.text}")
        cellchecks.snapshot(store, backend, cell_id, cell.model, "after", **checks)
        mem.end_cell(cell_id, load_id)
    if campaign.probes and current_model is not None and current_model not in refused:
        run_model_probes(store, backend, campaign, run_id, current_model, model_ids[current_model], echo)
    if not canaries_done and current_model is not None and current_model not in refused:
        pinned = any(c.pinned and c.model == current_model for c in cells)
        run_canaries(store, backend, campaign, run_id, current_model, model_ids[current_model],
                     position=len(cells), echo=echo, allow_evict=not pinned, load_id=load_id)
    if load_id is not None:
        store.update("loads", load_id, {"ended_at": utcnow(), "end_reason": "run ended"})


def _load_for_cell(store, backend, run_id, model_id, name, pin, refused, echo, mem) -> int | None:
    """Load the next model, unless the pinned-model rule keeps it off the cards (then ``refused`` says why).

    Before every load other than the pin's, free memory is read from the card
    and compared with the model's need (memory.budget.pin_guard).
    """
    guarded = pin is not None and name != pin
    reason = pin_guard(store, mem, model_id, name, pin) if guarded else None
    if reason is None:
        return _explicit_load(store, backend, run_id, model_id, name, echo, mem, checked=guarded)
    refused[name] = reason
    echo(f"load {name}: refused: {reason}")
    return store.insert("loads", {"run_id": run_id, "model_id": model_id, "trigger": "explicit",
                                  "requested_at": utcnow(), "status": "refused", "error_text": reason})


def _refused_samples(store, run_id, cell_id, cell, load_id, reason) -> int:
    """The cell's samples as exceptions that were never sent: any request would load the model after all."""
    for rep in range(1, cell.repetitions + 1):
        store.insert("samples", {
            "run_id": run_id, "cell_id": cell_id, "repetition": rep, "nonce": new_nonce(),
            "started_at": utcnow(), "kind": "measure", "load_id": load_id, "error_kind": "refused",
            "error_text": reason, "counter_source": "none"})
    return cell.repetitions


def _explicit_load(store, backend, run_id, model_id, name, echo, mem=None, checked=False) -> int | None:
    if mem is not None and not checked:
        # free memory read from the card right before the load, never inferred
        mem.before_load(model_id)
    try:
        res = backend.load(name)
    except BackendError as exc:
        echo(f"load {name}: failed: {exc}")
        return store.insert(
            "loads",
            {"run_id": run_id, "model_id": model_id, "trigger": "explicit", "requested_at": utcnow(),
             "status": "failed", "error_text": str(exc)},
        )
    if res.status == "already_loaded" and not backend.is_router():
        return None  # single-model server: the load happened before the run
    echo(
        f"load {name}: {res.status}"
        + (f" in {res.load_seconds:.2f} s" if res.load_seconds else "")
        + (f" ({res.error_text})" if res.error_text else "")
    )
    load_id = store.insert(
        "loads",
        {
            "run_id": run_id,
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
        pid = res.pid or router_child_pid(backend.url, name) if backend.is_router() else res.pid
        if pid and not res.pid:
            store.update("loads", load_id, {"pid": pid})
        mem.after_load(load_id, pid=pid, arg=backend.runner_arg(name))
    return load_id


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


def ok_or_none(row: dict) -> bool:
    """True when the sample succeeded (then the model must have been loaded)."""
    return not row.get("error_kind")


def run_summary(outcome: RunOutcome) -> str:
    return json.dumps(outcome.__dict__)
