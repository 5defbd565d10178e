"""The variants of a run: each loaded by a server of cardproof's own (or with Ollama's request options),
measured on its model's cells, and judged by its load's log.

Why a variant is a model of its own (``base~name``): a cell, a sample, a gate,
a median, a rule's value and a history series all belong to a model. A variant
measured as the model ``smollm2-q4_1~kv8`` goes through all of them unchanged
-- the same cell loop, the same gates, its own series in ``cardproof history``
-- and the ``variants`` row ties it to its base, with what it was asked and
what its log proved. A ``variant`` column on cells instead would have had every
query that groups by model group by model and variant too.

Order in a run: after the campaign's own cells (the base figures exist, and
the campaign's server is left with the pinned model only), before the fit test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import httpx

from cardproof.daemon.server import llamacpp
from cardproof.daemon.backends import BackendError
from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from cardproof.daemon.backends.llamaswap import LlamaSwapBackend
from cardproof.daemon.logs import LogSourceError, capture_file
from cardproof.daemon.logs.linking import attribute_run
from cardproof.daemon.logs.attribution import scope_facts
from cardproof.daemon.logs.lines import clean
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.run.load.fit import store_lines
from cardproof.daemon.logs.fit_evidence import _phase
from cardproof.daemon.run.load.fit_server import LaunchFailed, start_server
from cardproof.daemon.memory.budget import pin_guard
from cardproof.daemon.run.loads import free_router, load_for_cell
from cardproof.daemon.store import Store, StoreError, dumps, json_text, utcnow
from cardproof.daemon.campaign.variant_args import ollama_options
from cardproof.daemon.campaign.variant_evidence import check_variant
from cardproof.daemon.run.variants.ollama import OllamaVariantBackend
from cardproof.daemon.run.variants.servers import (BaseArgs, groups_for, log_path, preset_section, router_base,
                                                   router_command, single_base, single_command, write_preset)
from cardproof.daemon.campaign.tables.variants import Variant, VariantSettings, derived_name
from cardproof.daemon.run.variants.swap import (SWAP_BINARY_ENV, SwapConfigError, find_binary as swap_binary,
                                                generated_config, read_config, variant_entry, write_config)

if TYPE_CHECKING:
    from cardproof.daemon.run.context import RunContext

#: measure(ctx of the variant's server, variant model name, its load id, (error kind, reason) of samples
#: that cannot be taken or None); the runner's, so a variant's cells are measured as any model's
Measure = Callable[["RunContext", str, "int | None", "tuple[str, str] | None"], None]
#: a variant's samples where it was not loaded: the pin guard's refusal is the runner's own kind
NOT_LOADED = "variant_not_loaded"


def planned_samples(campaign) -> int:
    """The samples the campaign's variants add to its plan."""
    settings: VariantSettings | None = campaign.sections.get("variants")
    if settings is None:
        return 0
    classes = settings.prompt_classes or campaign.prompt_classes
    per_variant = len(classes) * sum(settings.repetitions or campaign.repetitions_for(r) for r in campaign.reasoning)
    return len(settings.plan(tuple(m.name for m in campaign.models))) * per_variant


def run_variants(ctx: "RunContext", measure: Measure) -> None:
    settings: VariantSettings | None = ctx.campaign.sections.get("variants")
    if settings is None:
        return
    plan = settings.plan(tuple(m.name for m in ctx.campaign.models))
    rows = [_register(ctx, position, model, variant) for position, (model, variant) in enumerate(plan)]
    pinned = {m.name for m in ctx.campaign.models if m.pinned}
    kind = ctx.campaign.backend
    ctx.echo(f"variants: {len(rows)} loads ({len({m for m, _ in plan})} models x "
             f"{len(settings.variants())} variants)")
    if kind == "llama-server":
        free_router(ctx, [m for m in dict.fromkeys(m for m, _ in plan) if m not in pinned], "variants")
        if ctx.backend.is_router():
            _router(ctx, rows, settings, measure)
        else:
            _single(ctx, rows, settings, measure)
    elif kind == "ollama":
        _ollama(ctx, rows, pinned, measure)
    elif kind == "llama-swap":
        free_router(ctx, [m for m in dict.fromkeys(m for m, _ in plan) if m not in pinned], "variants")
        _swap(ctx, rows, settings, measure)
    else:  # the campaign check refuses these; a backend registered later gets the reason here
        for row in rows:
            _not_loaded(ctx, row, "refused", f"backend {kind} cannot load a variant", measure)


# -- the variant's rows ------------------------------------------------------------------------------

@dataclasses.dataclass
class _Row:
    id: int
    model: str  # the base
    variant: Variant
    name: str  # base~variant
    model_id: int


def _register(ctx: "RunContext", position: int, model: str, variant: Variant) -> _Row:
    """The variant's models row (its base's file and identity under its own name) and its variants row."""
    name = derived_name(model, variant.name)
    base = ctx.store.db["models"].get(ctx.model_ids[model])
    row = {k: v for k, v in base.items() if k != "id"} | {"name": name}
    model_id = ctx.store.upsert_model(row)
    ctx.model_ids[name] = model_id
    vid = ctx.store.insert("variants", {
        "run_id": ctx.run_id, "position": position, "model_id": model_id, "base_model_id": ctx.model_ids[model],
        "name": variant.name, "source": variant.source, "args_json": json_text(list(variant.args)),
        "settings_json": json_text(dict(variant.settings)) if variant.settings else None,
        "status": "planned", "started_at": utcnow()})
    return _Row(vid, model, variant, name, model_id)


def _update(ctx: "RunContext", row: _Row, **cols) -> None:
    ctx.store.update("variants", row.id, cols)


def _not_loaded(ctx: "RunContext", row: _Row, status: str, reason: str, measure: Measure,
                load_id: int | None = None, *, pin_guard_said: bool = False) -> None:
    """A variant that was never loaded: its cells' samples are stored as not taken, with the reason."""
    ctx.echo(f"variant {row.name}: {status}: {reason}")
    _update(ctx, row, status=status, note=reason[:2000], load_id=load_id, ended_at=utcnow())
    measure(ctx, row.name, load_id, ("refused" if pin_guard_said else NOT_LOADED, reason))


def _folder(store: Store) -> Path:
    return Path(store.path).parent / "variant-logs"


def _model_file(ctx: "RunContext", model: str) -> str | None:
    row = ctx.store.db.execute("select path from models where id = ?", [ctx.model_ids[model]]).fetchone()
    return row[0] if row and row[0] else None


def _end_load(ctx: "RunContext", load_id: int | None) -> None:
    if load_id is not None:
        ctx.store.update("loads", load_id, {"ended_at": utcnow(), "end_reason": "variant measured"})


# -- router mode: a router of cardproof's own on a preset written for the run -----------------------

def _router(ctx: "RunContext", rows: list[_Row], settings: VariantSettings, measure: Measure) -> None:

    bases: dict[str, BaseArgs] = {}
    for model in dict.fromkeys(r.model for r in rows):
        try:
            entry = ctx.backend.model_entry(model)
        except BackendError:
            entry = None
        bases[model] = router_base(entry) or BaseArgs("not read")
    binary = next((b.binary for b in bases.values() if b.binary), None)
    groups = groups_for(binary)
    sections = []
    for row in rows:
        base = bases[row.model]
        section = preset_section(row.name, base, row.variant.args, _model_file(ctx, row.model), groups)
        sections.append(section)
        _update(ctx, row, server_kind="router", base_args_source=base.source,
                base_args_json=json_text(base.args or [f"{k} = {v}" for k, v in base.preset]),
                server_args_json=json_text(section[1:-1]))
    folder = _folder(ctx.store)
    preset = write_preset(folder / f"run{ctx.run_id}-variants.ini", sections)
    log = log_path(folder, ctx.run_id, "variants-router")
    try:
        server = llamacpp.LlamaServerProcess(router_command(preset), log_path=log, binary=binary)
        server.start(ready_timeout_s=settings.load_timeout_s)
    except (llamacpp.LlamaServerMissing, llamacpp.LlamaServerFailed, OSError) as exc:
        reason = f"the variants' router did not start: {_last_error(log) or exc}"
        for row in rows:
            _not_loaded(ctx, row, "failed", reason, measure)
        return
    ctx.echo(f"variants: router of cardproof's own at {server.url}, preset {preset}, log {log}")
    backend = LlamaServerBackend(server.url, timeout_s=ctx.campaign.request_timeout_s)

    def child_args(row: _Row) -> None:
        entry = backend.model_entry(row.name)
        args = ((entry or {}).get("status") or {}).get("args")
        if isinstance(args, list):  # what the router made of the section: the child's command line
            _update(ctx, row, server_args_json=json_text([a for a in args[1:] if isinstance(a, str)]))

    try:
        _measure_each(ctx, backend, rows, measure, before_load=child_args)
    finally:
        backend.close()
        server.stop()
        _capture(ctx, log)


def _measure_each(ctx: "RunContext", backend, rows: list[_Row], measure: Measure,
                  before_load: Callable[[_Row], None] | None = None) -> None:
    """Each variant loaded through a server that loads models on request (a router, llama-swap of
    cardproof's own), by the runner's load path, measured, and unloaded before the next one."""
    vctx = dataclasses.replace(ctx, backend=backend)
    pin = next((m.name for m in ctx.campaign.models if m.pinned), None)
    for row in rows:
        if before_load is not None:
            before_load(row)
        refused: dict[str, str] = {}
        load_id = load_for_cell(vctx, row.name, pin, refused)
        status = ctx.store.db.execute("select status, error_text from loads where id = ?",
                                      [load_id]).fetchone() if load_id else None
        if row.name in refused or (status and status[0] == "failed"):
            why = refused.get(row.name) or f"the load failed: {status[1]}"
            _not_loaded(vctx, row, "refused" if row.name in refused else "failed", why, measure, load_id,
                        pin_guard_said=row.name in refused)
            continue
        _update(ctx, row, load_id=load_id, status="measuring")
        try:
            measure(vctx, row.name, load_id, None)
        finally:
            _end_load(ctx, load_id)
            _unload(backend, row.name)
        _update(ctx, row, ended_at=utcnow())


def _unload(backend, name: str, wait_s: float = 60.0) -> None:
    """Unload a variant and wait until its process is gone: the next one's memory reading is its own."""
    try:
        backend.unload(name)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and backend.model_status(name) not in ("unloaded", None):
            time.sleep(0.05)
    except (BackendError, httpx.HTTPError, OSError):
        pass  # the next load evicts it anyway (--models-max 1)


def _capture(ctx: "RunContext", log: Path) -> None:
    """The variants' router log into the store, its loads linked to the runner's by model name and port."""
    try:
        capture_file(ctx.store, log, run_id=ctx.run_id, final=True)
        attribute_run(ctx.store, ctx.run_id)
    except (LogSourceError, StoreError) as exc:
        ctx.echo(f"warning: variants' log capture: {exc}")


def _last_error(log: Path) -> str | None:
    """The server's own last error line (``option 'x' not recognized in preset 'y'``), for the reason."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-200:]
    except OSError:
        return None
    errors = [ln for ln in lines if " E " in ln or "error" in ln.lower()]
    return clean(errors[-1])[2].strip()[:500] if errors else None


# -- a single server: one llama-server of cardproof's own per variant, as the fit test starts -------

def _single(ctx: "RunContext", rows: list[_Row], settings: VariantSettings, measure: Measure) -> None:
    base = single_base(ctx.campaign.url) or BaseArgs("not read")
    groups = groups_for(base.binary)
    pin = next((m.name for m in ctx.campaign.models if m.pinned), None)
    for row in rows:
        model_file = _model_file(ctx, row.model)
        args = single_command(row.name, base, row.variant.args, model_file, groups)
        _update(ctx, row, server_kind="single", base_args_source=base.source, base_args_json=json_text(base.args),
                server_args_json=json_text(args))
        if base.source == "not read" and not model_file:
            _not_loaded(ctx, row, "refused", "no model file known: set file in the model's [[models]] table "
                        "(the server's command line could not be read)", measure)
            continue
        guarded = pin is not None and ctx.mem is not None  # the pin guard reads the card's free memory itself
        reason = pin_guard(ctx.store, ctx.mem, row.model_id, row.name, pin) if guarded else None
        if reason:
            _not_loaded(ctx, row, "refused", reason, measure, pin_guard_said=True)
            continue
        if ctx.mem is not None and not guarded:  # free memory read from the card right before the load
            ctx.mem.before_load(row.model_id)
        log = log_path(_folder(ctx.store), ctx.run_id, row.name)
        load_id = ctx.store.insert("loads", {"run_id": ctx.run_id, "model_id": row.model_id, "trigger": "explicit",
                                             "requested_at": utcnow(), "status": "loading",
                                             "model_file": model_file})
        t0 = time.monotonic()
        try:
            server = start_server(args, log, settings.load_timeout_s, binary=base.binary)
        except (LaunchFailed, llamacpp.LlamaServerMissing, OSError) as exc:
            ctx.store.update("loads", load_id, {"status": "failed", "error_text": str(exc)[:500],
                                                "ended_at": utcnow()})
            _store_log(ctx, load_id, log)
            _not_loaded(ctx, row, "failed", f"the variant's server did not start: {_last_error(log) or exc}",
                        measure, load_id)
            continue
        seconds = round(time.monotonic() - t0, 3)
        ctx.store.update("loads", load_id, {"status": "loaded", "ready_at": utcnow(), "load_seconds": seconds,
                                            "pid": server.pid})
        ctx.echo(f"load {row.name}: loaded in {seconds:.2f} s (a llama-server of cardproof's own, log {log})")
        if ctx.mem is not None:
            ctx.mem.after_load(load_id, pid=server.pid)
        backend = LlamaServerBackend(server.url, timeout_s=ctx.campaign.request_timeout_s)
        _update(ctx, row, load_id=load_id, status="measuring")
        try:
            measure(dataclasses.replace(ctx, backend=backend), row.name, load_id, None)
        finally:
            backend.close()
            server.stop()
            _end_load(ctx, load_id)
            _store_log(ctx, load_id, log)
        _update(ctx, row, ended_at=utcnow())


def _store_log(ctx: "RunContext", load_id: int, log: Path) -> None:
    """The variant server's own log: every line linked to its load, every fact the parsers read in it."""
    pairs = store_lines(ctx.store, ctx.run_id, load_id, log)
    if not pairs:
        return
    rows = []
    in_draft = in_swa = False
    for line_id, raw in pairs:
        text = clean(raw)[2]
        in_draft, in_swa = _phase(text, in_draft, in_swa)
        for f in scope_facts(parse_line(text), in_draft, in_swa):
            rows.append([load_id, line_id, f.name, f.device, f.value_num, f.value_text, f.unit])
    conn = ctx.store.db.conn
    with conn:
        conn.executemany("insert into facts (load_id, line_id, name, device, value_num, value_text, unit) "
                         "values (?, ?, ?, ?, ?, ?, ?)", rows)


# -- Ollama: the model's own runner, with the variant's settings as request options -----------------

def _ollama(ctx: "RunContext", rows: list[_Row], pinned: set[str], measure: Measure) -> None:

    pin = next(iter(pinned), None)
    for row in rows:
        options, refused_why = ollama_options(row.variant.args)
        _update(ctx, row, server_kind="ollama", base_args_source="not read",
                server_args_json=json_text({"options": options}))
        if refused_why:
            _not_loaded(ctx, row, "refused", "; ".join(refused_why), measure)
            continue
        if row.model in pinned:
            # Ollama keeps one runner per model: the variant's options would replace the production runner
            _not_loaded(ctx, row, "refused", f"{row.model} is pinned: Ollama runs one runner per model, and "
                        "loading it with other options would replace the one in production", measure)
            continue
        backend = OllamaVariantBackend(ctx.campaign.url, timeout_s=ctx.campaign.request_timeout_s,
                                       num_ctx=ctx.campaign.num_ctx, served={row.name: row.model}, options=options)
        vctx = dataclasses.replace(ctx, backend=backend)
        try:
            try:  # the base's runner (or an earlier variant's) goes first, so this load is the variant's
                if backend.model_status(row.model) == "loaded":
                    backend.unload(row.model)
            except BackendError as exc:
                ctx.echo(f"variant {row.name}: could not unload {row.model} first: {exc}")
            refused: dict[str, str] = {}
            load_id = load_for_cell(vctx, row.name, pin, refused)
            if row.name in refused:
                _not_loaded(vctx, row, "refused", refused[row.name], measure, load_id, pin_guard_said=True)
                continue
            _update(ctx, row, load_id=load_id, status="measuring")
            try:
                measure(vctx, row.name, load_id, None)
            finally:
                _end_load(ctx, load_id)
            _update(ctx, row, ended_at=utcnow())
        finally:
            backend.close()


# -- llama-swap: a config generated for the run, served by a llama-swap of cardproof's own ---------

def _swap(ctx: "RunContext", rows: list[_Row], settings: VariantSettings, measure: Measure) -> None:

    try:
        config = read_config(settings.llama_swap_config or "")
    except SwapConfigError as exc:
        for row in rows:
            _not_loaded(ctx, row, "refused", str(exc), measure)
        return
    entries = {}
    for row in rows:
        try:
            entry = variant_entry(config, row.model, row.variant.args)
        except SwapConfigError as exc:
            _not_loaded(ctx, row, "refused", str(exc), measure)
            continue
        entries[row.name] = entry
        _update(ctx, row, server_kind="llama-swap", base_args_source="llama-swap config",
                base_args_json=json_text(shlex.split(config["models"][row.model]["cmd"])),
                server_args_json=json_text(shlex.split(entry["cmd"])))
    rows = [r for r in rows if r.name in entries]
    if not rows:
        return
    binary = swap_binary()
    if binary is None:
        for row in rows:
            _not_loaded(ctx, row, "refused", "no llama-swap binary on this machine to serve the variants' config "
                        f"(set {SWAP_BINARY_ENV} or put llama-swap on the PATH)", measure)
        return
    folder = _folder(ctx.store)
    path = write_config(folder / f"run{ctx.run_id}-variants-llama-swap.yaml", generated_config(config, entries))
    log = log_path(folder, ctx.run_id, "variants-llama-swap")
    port = llamacpp.free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        proc = subprocess.Popen([str(binary), "--config", str(path), "--listen", f"127.0.0.1:{port}"], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if not _answers(url, proc, settings.load_timeout_s):
            for row in rows:
                _not_loaded(ctx, row, "failed", f"the variants' llama-swap did not start: {_last_error(log) or ''}",
                            measure)
            return
        ctx.echo(f"variants: llama-swap of cardproof's own at {url}, config {path}, log {log}")
        backend = LlamaSwapBackend(url, timeout_s=ctx.campaign.request_timeout_s)
        try:
            _measure_each(ctx, backend, rows, measure)
        finally:
            backend.close()
    finally:
        _stop(proc)
        _capture(ctx, log)


def _answers(url: str, proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether the proxy answers ``/running`` before it exits or the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/running", timeout=2.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def _stop(proc: subprocess.Popen) -> None:
    """The proxy and the upstreams it started (one process group), asked first, then killed."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


# -- after the run's logs are in: did each argument take? ------------------------------------------

def judge_variants(store: Store, run_id: int, echo: Callable[[str], None] = print) -> list[dict]:
    """Each measured variant's arguments against its load's stored lines; the verdicts stored on its row."""
    try:
        rows = list(store.db.query("select v.*, m.name as model from variants v join models m on m.id = v.model_id "
                                   "where v.run_id = ? order by v.position", [run_id]))
    except Exception:  # noqa: BLE001 -- a store without the table: no variants to judge
        return []
    out = []
    for v in rows:
        if v["load_id"] is None or v["status"] in ("refused", "failed"):
            continue
        lines = [(r[0], r[1]) for r in store.db.execute(
            "select id, raw from log_lines where load_id = ? order by id", [v["load_id"]]).fetchall()]
        args = json.loads(v["args_json"] or "[]")
        status, checks = check_variant(args, lines)
        store.update("variants", v["id"], {"status": status, "checks_json": dumps([c.to_json() for c in checks])})
        said = ", ".join(f"{c.flag} {c.value or ''}".strip() + f": {c.status}"
                         + (f" (log: {c.observed})" if c.status == "contradicted" else "") for c in checks)
        echo(f"variant {v['model']}: {status} ({said})")
        out.append({"id": v["id"], "status": status, "checks": checks})
    return out
