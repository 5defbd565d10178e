"""The fit test: each model loaded at each ``[fit]`` context, and whether it fits on the cards.

Why a server of cardproof's own per context, not the campaign's router: a
router preset fixes one ``ctx-size`` per model, and changing it means
rewriting the user's preset and restarting their router. A llama-server
started here with ``-m FILE -c N --parallel 1`` gets exactly the context
asked for (one slot, so the whole context is one request's), writes a log of
its own that holds this load's lines and nobody else's, and is stopped after.
It is started with ``-ngl 999 --fit off``: every layer asked onto the cards
and llama.cpp's automatic fitting off, so nothing is quietly moved to the
CPU or shrunk to make the load succeed -- what does not fit shows as such.
``[fit] server_args`` adds the user's own flags (cache types, tensor split).

For every context: a load row (trigger ``fit``), the log's lines and facts
linked to it, the card's memory for the server's processes where a memory
source exists, one short request, and a ``fit_checks`` row with the verdict.
A context beyond the model's trained context is refused before any load; a
load that fails is a ``does_not_fit`` row, and the test goes on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import httpx

from cardproof.marks import N_
from cardproof.daemon.backends.http import tls_verify
from cardproof.daemon.server import llamacpp
from cardproof.daemon.store.crashes import end_reason as crash_end
from cardproof.daemon.memory.host import host_available, read_process
from cardproof.daemon.memory.procinfo import children
from cardproof.daemon.memory.readings import NOT_MEASURED, SourceUnavailable
from cardproof.daemon.server.prompts import build_prompt, new_nonce
from cardproof.daemon.run.loads import free_router
from cardproof.daemon.store.said import Said, english
from cardproof.daemon.store import Store, json_text, utcnow
from cardproof.daemon.logs.fit_evidence import LoadEvidence, judge, read_lines
from cardproof.daemon.run.load.fit_server import LaunchFailed, Launched, own_args, start_server, trained_context
from cardproof.daemon.campaign.tables.fit import FitSettings

if TYPE_CHECKING:
    from cardproof.daemon.run.context import RunContext

VERDICT_WORDS = {"fits": "fits", "does_not_fit": N_("does not fit"), "not_on_card": N_("not on a card"),
                 "refused": "refused", "unknown": "no verdict"}
REQUEST_PROMPT_TOKENS = 32
MAX_LOG_BYTES = 64 * 2**20  # a runaway log is read up to here: a fit load's facts come in its first lines


def run_fit(ctx: "RunContext") -> None:
    """The ``[fit]`` test of every model it names, after the cells (the card free of the run's loads)."""
    settings: FitSettings | None = ctx.campaign.sections.get("fit")
    if settings is None:
        return
    plan = settings.plan(tuple(m.name for m in ctx.campaign.models))
    pinned = {m.name for m in ctx.campaign.models if m.pinned}
    free_router(ctx, [n for n, _ in plan if n not in pinned], "fit")
    source = ctx.mem.source if ctx.mem is not None else None
    for name, contexts in plan:
        row = ctx.store.db.execute("select path from models where id = ?", [ctx.model_ids[name]]).fetchone()
        fit_model(ctx.store, run_id=ctx.run_id, model=name, model_id=ctx.model_ids[name],
                  model_file=row[0] if row else None, settings=settings, source=source, echo=ctx.echo,
                  contexts=contexts)


def fit_model(store: Store, *, run_id: int, model: str, model_id: int, model_file: str | None,
              settings: FitSettings, source, echo: Callable[[str], None],
              launch: Callable[[list[str], Path, float], Launched] = start_server,
              contexts: tuple[int, ...] | None = None) -> list[dict]:
    """Every context (``contexts``, else ``settings.contexts``) for one model; returns the stored rows."""
    trained = trained_context(model_file)
    rows = []
    for context in contexts or settings.contexts or ():
        row = fit_one(store, run_id=run_id, model=model, model_id=model_id, model_file=model_file,
                      context=context, trained=trained, settings=settings, source=source, launch=launch)
        echo(summary(model, row))
        rows.append(row)
    return rows


def fit_one(store: Store, *, run_id: int, model: str, model_id: int, model_file: str | None, context: int,
            trained: int | None, settings: FitSettings, source, launch) -> dict:
    """One context: refused, or loaded, read, asked once and stopped; the stored ``fit_checks`` row."""
    position = store.db.execute("select count(*) from fit_checks where run_id = ?", [run_id]).fetchone()[0]
    row: dict = {"run_id": run_id, "model_id": model_id, "position": position, "context_tokens": context,
                 "started_at": utcnow(), "n_ctx_train": trained,
                 "n_ctx_train_source": "GGUF context_length" if trained else None,
                 "server_args_json": json_text(list(settings.server_args))}
    refused = _refusal(context, trained, model_file)
    if refused is not None:
        return _store(store, row, "refused", [refused], [])
    log_path = _log_path(store, run_id, model_id, position, context)
    args = ["-m", model_file, "-c", str(context), "--parallel", "1", *own_args(), *settings.server_args]
    row["log_path"] = str(log_path)
    load_id = store.insert("loads", {"run_id": run_id, "model_id": model_id, "trigger": "fit",
                                     "requested_at": utcnow(), "status": "loading", "model_file": model_file})
    row["load_id"] = load_id
    t0 = time.monotonic()
    load_error = request_error = None
    memory: dict = {}
    host = host_available()  # before the load: what the host could give it without swapping
    row.update(host_available_mib=host["available_mib"], host_total_mib=host["total_mib"])
    try:
        server = launch(args, log_path, settings.load_timeout_s)
    except llamacpp.LlamaServerMissing as exc:
        # no server binary on this machine says nothing about the model: refused, not "does not fit"
        store.update("loads", load_id, {"status": "refused", "error_text": str(exc), "ended_at": utcnow()})
        return _store(store, row, "refused", [Said("no llama-server to start here: {error}",
                                                   {"error": Said.quoted(str(exc)[:300])})], [])
    except (LaunchFailed, OSError) as exc:
        load_error = str(exc)
        sig = getattr(exc, "signal", None)  # the server died by a signal: that is how its load ended
        store.update("loads", load_id, {"status": "failed", "error_text": load_error, "ended_at": utcnow(),
                                        "end_reason": crash_end(sig) if sig else "fit test",
                                        "exit_status": -sig.number if sig else None})
    else:
        store.update("loads", load_id, {"status": "loaded", "ready_at": utcnow(), "pid": server.pid,
                                        "load_seconds": round(time.monotonic() - t0, 3)})
        try:
            first = _card(source, server.pid)
            answer = _ask(server.url, model, settings.max_tokens)
            row.update({k: answer[k] for k in ("prompt_tokens", "completion_tokens", "request_ms")})
            request_error = answer["error"]
            memory = _worst(first, _card(source, server.pid))  # after the request: the cache holds its tokens
            row.update(_host_peak(server.pid))
        finally:
            server.stop()
        store.update("loads", load_id, {"ended_at": utcnow(), "end_reason": "fit test"})
    ev = _store_log(store, run_id, load_id, log_path)
    if trained is None and ev.n_ctx_train is not None:
        row.update({"n_ctx_train": ev.n_ctx_train, "n_ctx_train_source": "server log"})
        refused = _refusal(context, ev.n_ctx_train, model_file)
        if refused is not None and load_error is None:
            # the log named the trained context only now: the row is a refusal, its load kept as evidence
            _fill(row, ev, memory, request_error)
            return _store(store, row, "refused", [refused], [], ev)
    verdict = judge(ev, context_tokens=context, load_error=load_error, request_error=request_error,
                    card_readable=memory.get("resident_mib") is not None)
    _fill(row, ev, memory, request_error)
    row["host_verdict"] = host_verdict(verdict.verdict, ev, row)
    return _store(store, row, verdict.verdict, verdict.reasons, verdict.missing, ev)


def _host_peak(pid: int | None) -> dict:
    """The server process's peak in host memory: the kernel's high-water mark where it keeps one, else RSS now."""
    mem = read_process(pid) if pid else None
    if mem is None or mem.rss_mib is None:
        return {}
    return {"host_peak_mib": max(v for v in (mem.hwm_mib, mem.rss_mib) if v is not None),
            "host_anon_mib": mem.anon_mib}


def host_verdict(verdict: str, ev: LoadEvidence, row: dict) -> str | None:
    """Whether a load that runs in host memory (on the CPU, or Apple's unified memory) fits there.

    The same rules as on a card: only what was measured decides. Fits: the load and its request
    succeeded and the process's peak stayed within what the host had available before the load
    (Linux's MemAvailable). Does not fit: the peak went beyond it (the host swapped or dropped the
    mapped weights to make room). None where either figure is missing or the load is on a card.
    """
    unified = any(d.startswith(("MTL", "Metal")) for d in ev.buffers)
    if verdict != "not_on_card" and not (unified and verdict == "fits"):
        return None
    peak, available = row.get("host_peak_mib"), row.get("host_available_mib")
    if peak is None or available is None or not row.get("request_ok"):
        return None
    return "fits" if peak <= available else "does_not_fit"


def _refusal(context: int, trained: int | None, model_file: str | None) -> Said | None:
    if not model_file:
        return Said("no model file known: set file in the model's [[models]] table", {})
    if not Path(model_file).is_file():
        # a remote server's path, or a file moved since: a load here would fail for a reason that is not fit
        return Said("model file not on this machine: {path}", {"path": Said.quoted(model_file)})
    if trained is not None and context > trained:
        return Said("context {context:,} tokens exceeds the model's trained context of {trained:,} tokens",
                    {"context": context, "trained": trained})
    return None


def _log_path(store: Store, run_id: int, model_id: int, position: int, context: int) -> Path:
    folder = Path(store.path).parent / "fit-logs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"run{run_id}-model{model_id}-{position}-ctx{context}.log"
    path.unlink(missing_ok=True)  # a file left by an earlier store at this path: this load's lines only
    return path


def _card(source, pid: int | None) -> dict:
    """The server's card memory and the cards' free memory now; the reason where there is no reading."""
    if source is None:
        return {"memory_note": NOT_MEASURED}
    try:
        reading = source.read()
    except SourceUnavailable as exc:
        return {"memory_note": f"{NOT_MEASURED}: {exc}", "memory_source": getattr(source, "kind", None)}
    pids = [pid, *children(pid)] if pid else []
    total = sum(d.total_mib for d in reading.devices)
    return {"resident_mib": reading.used_by(pids) if pids else None,
            "card_total_mib": round(total, 3) if reading.devices else None,
            "free_mib": round(sum(d.free_mib for d in reading.devices), 3) if reading.devices else None,
            "memory_source": reading.source, "memory_note": None}


def _worst(a: dict, b: dict) -> dict:
    """The larger resident figure and the smaller free one of two readings."""
    out = dict(b) if b.get("resident_mib") is not None or a.get("resident_mib") is None else dict(a)
    for key, pick in (("resident_mib", max), ("free_mib", min)):
        values = [r[key] for r in (a, b) if r.get(key) is not None]
        out[key] = pick(values) if values else None
    return out


def _ask(url: str, model: str, max_tokens: int) -> dict:
    """One short chat request that must be answered; the error in words otherwise."""
    body = {"model": model, "messages": [{"role": "user", "content": build_prompt(REQUEST_PROMPT_TOKENS,
                                                                                  new_nonce())}],
            "max_tokens": max_tokens, "cache_prompt": False, "stream": False}
    out = {"prompt_tokens": None, "completion_tokens": None, "request_ms": None, "error": None}
    t0 = time.perf_counter()
    try:
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300.0, verify=tls_verify(url))
        out["request_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        data = r.json()
    except (httpx.HTTPError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return out
    if r.status_code != 200:
        out["error"] = f"HTTP {r.status_code}: {r.text[:200]}"
        return out
    usage = data.get("usage") if isinstance(data, dict) else None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        out["error"] = "the answer holds no choices"
        return out
    if isinstance(usage, dict):
        out["prompt_tokens"] = _int(usage.get("prompt_tokens"))
        out["completion_tokens"] = _int(usage.get("completion_tokens"))
    return out


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40 else None


def _store_log(store: Store, run_id: int, load_id: int, path: Path) -> LoadEvidence:
    """The load's log lines stored and linked to it; its evidence with the stored line ids."""
    pairs = store_lines(store, run_id, load_id, path)
    if pairs is None:
        return LoadEvidence()
    ev = read_lines(pairs)
    facts = _facts(ev)
    conn = store.db.conn
    with conn:
        for name, device, value, line_id in facts:
            conn.execute("insert into facts (load_id, line_id, name, device, value_num, unit) values (?, ?, ?, ?, ?, ?)",
                         [load_id, line_id, name, device, value, "MiB" if name.endswith("_mib") else None])
    return ev


def store_lines(store: Store, run_id: int, load_id: int, path: Path) -> list[tuple[int, str]] | None:
    """Every line of a log that one server process of cardproof's own wrote, stored and linked to its load.

    The process wrote nothing else into the file, so its lines are its load's by process identity
    (``attribution = 'pid'``). Returns ``(line_id, text)`` in order; None where the file cannot be read.
    """
    try:
        with path.open("rb") as f:
            data = f.read(MAX_LOG_BYTES)
    except OSError:
        return None
    conn = store.db.conn
    with conn:
        cur = conn.execute("select id from log_sources where kind = 'plain' and name = ?", [str(path)])
        found = cur.fetchone()
        source_id = found[0] if found else conn.execute(
            "insert into log_sources (kind, name, updated_at) values ('plain', ?, ?)", [str(path), utcnow()]).lastrowid
        pairs: list[tuple[int, str]] = []
        offset = 0
        for chunk in data.splitlines(keepends=True):
            raw = chunk.rstrip(b"\r\n")
            try:
                text, raw_bytes = raw.decode("utf-8"), None
            except UnicodeDecodeError:  # kept as bytes beside a readable copy, never dropped
                text, raw_bytes = raw.decode("utf-8", errors="replace"), raw
            line_id = conn.execute(
                "insert into log_lines (source_id, run_id, offset, raw, raw_bytes, load_id, attribution) "
                "values (?, ?, ?, ?, ?, ?, 'pid')", [source_id, run_id, offset, text, raw_bytes, load_id]).lastrowid
            pairs.append((line_id, text))
            offset += len(chunk)
        conn.execute("update log_sources set offset = ?, updated_at = ? where id = ?", [offset, utcnow(), source_id])
    return pairs


def _facts(ev: LoadEvidence) -> list[tuple]:
    """The load's facts as ``facts`` rows (the figures every other load has), cited to their first line."""
    first = {k: (v[0] if v else None) for k, v in ev.evidence.items()}
    out = []
    if ev.offloaded_layers is not None:
        out.append(("offloaded_layers", None, float(ev.offloaded_layers), first.get("layers")))
        if ev.total_layers is not None:
            out.append(("total_layers", None, float(ev.total_layers), first.get("layers")))
    if ev.ctx_size is not None:
        out.append(("ctx_size", None, float(ev.ctx_size), first.get("ctx")))
    for device, per in ev.buffers.items():
        for name, mib in per.items():
            out.append((name, device, mib, first.get("kv" if "kv" in name else "buffers")))
    return out


def _fill(row: dict, ev: LoadEvidence, memory: dict, request_error: str | None) -> None:
    row.update({
        "ctx_size": ev.ctx_size, "offloaded_layers": ev.offloaded_layers, "total_layers": ev.total_layers,
        "kv_card_mib": ev.kv_card_mib, "kv_host_mib": ev.kv_host_mib,
        "buffers_json": json_text(ev.buffers, sort_keys=True),
        "request_ok": int(request_error is None and row.get("load_id") is not None and row.get("request_ms") is not None),
        "request_error": request_error,
        # no reading where the server never came up: the row says so by NULLs, not by missing keys
        **{"resident_mib": None, "card_total_mib": None, "free_mib": None, "memory_source": None,
           "memory_note": None}, **memory,
    })


def _store(store: Store, row: dict, verdict: str, reasons: list[Said], missing: list[str],
           ev: LoadEvidence | None = None) -> dict:
    row.update({"verdict": verdict, "ended_at": utcnow(),
                "reasons_text": english(reasons) if reasons else None,
                "reasons_json": json_text([r.to_json() for r in reasons]) if reasons else None,
                "evidence_json": json_text({**(ev.evidence if ev else {}), "missing": missing})})
    row["id"] = store.insert("fit_checks", row)
    return row


def summary(model: str, row: dict) -> str:
    """One progress line for a context: the verdict, its reasons, the buffers it rests on."""
    head = f"fit {model} {row['context_tokens']:,} tokens: {VERDICT_WORDS.get(row['verdict'], row['verdict'])}"
    if row.get("reasons_text"):
        head += f": {row['reasons_text']}"
    if row["verdict"] == "refused":
        return head
    parts = []
    if row.get("kv_card_mib") or row.get("kv_host_mib"):
        parts.append(f"KV {row['kv_card_mib'] or 0:.1f} MiB on cards, {row['kv_host_mib'] or 0:.1f} MiB on host")
    buffers = json.loads(row.get("buffers_json") or "{}")
    if buffers:  # what the server allocated, card or not: a CPU-only load still shows its own figures
        parts.append("buffers " + ", ".join(f"{d} {sum(b.values()):.1f} MiB" for d, b in sorted(buffers.items())))
    if row.get("resident_mib") is not None:
        parts.append(f"resident {row['resident_mib']:.0f} MiB of {row['card_total_mib']:.0f} MiB")
    if row.get("host_verdict"):
        parts.append(f"host memory: {VERDICT_WORDS[row['host_verdict']]}, process peak {row['host_peak_mib']:.0f} MiB"
                     f" of {row['host_available_mib']:.0f} MiB available before the load")
    return head + (f" ({'; '.join(parts)})" if parts else "")
