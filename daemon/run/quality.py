"""``[quality]`` in a run: llama-perplexity on each ladder's base, then on every member and variant against it.

After the cells (and the variants, whose models this reads), with the card
free of the campaign's loads: each llama-perplexity process is a load of its
own (``loads.trigger = 'quality'``; it reads the model file like a server
does), its output is that load's log (every line stored, attributed to it by
process identity, as the fit test's servers), each figure a fact citing its
line, and a ``quality_checks`` row holds the figures with the line of each.
The base's logits go to a temporary folder beside the store (200 MB for a
49k vocabulary over 8 chunks of 512 tokens; gigabytes for large vocabularies
and contexts) and are deleted when its ladder is done: they are never
published. llama-perplexity exits with status 0 on most of its refusals, so
what it printed decides, never the exit status alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cardproof.daemon.server import llamacpp
from cardproof.daemon.store.crashes import end_reason as crash_end, from_returncode
from cardproof.daemon.run.load.fit import store_lines
from cardproof.daemon.run.loads import free_router
from cardproof.daemon.store.said import Said, english
from cardproof.daemon.store import Store, json_text, utcnow
from cardproof.daemon.campaign.tables.variants import derived_name
from cardproof.daemon.quality import text
from cardproof.daemon.quality.parse import REQUIRED, Output, parse_output
from cardproof.daemon.quality.plan import Entry, Ladder, plan
from cardproof.daemon.campaign.tables.quality import QualitySettings, perplexity_args

if TYPE_CHECKING:
    from cardproof.daemon.run.context import RunContext

#: figure -> (fact name, unit) stored on the process's load, each citing its line (the chunk size is no
#: ``ctx_size``: that fact is a serving load's context, which the article's Setup states)
FACTS = {"kld_mean": ("kld_mean", None), "kld_p99": ("kld_p99", None), "same_top": ("same_top", "%"),
         "ppl": ("ppl", None), "final_ppl": ("ppl", None), "ppl_base": ("ppl_base", None),
         "ppl_ratio": ("ppl_ratio", None), "chunks": ("kld_chunks", None), "n_ctx": ("kld_context", None)}
FIGURES = ("kld_mean", "kld_mean_err", "kld_median", "kld_p99", "kld_max", "same_top", "same_top_err", "ppl",
           "ppl_err", "ppl_base", "ppl_base_err", "ppl_ratio", "ppl_ratio_err")


def run_quality(ctx: "RunContext") -> None:
    """The campaign's ``[quality]``, after its cells and variants."""
    settings: QualitySettings | None = ctx.campaign.sections.get("quality")
    if settings is None:
        return
    pinned = {m.name for m in ctx.campaign.models if m.pinned}  # llama-perplexity's load has the card alone
    free_router(ctx, [m.name for m in ctx.campaign.models if m.name not in pinned], "quality")
    names = [m.name for m in ctx.campaign.models]
    chosen = [n for n in names if n in set(settings.models or names)]
    variants = ctx.campaign.sections.get("variants")
    wanted = [(m, v) for m, v in (variants.plan(tuple(names)) if variants is not None else [])
              if m in chosen and v.name in settings.variants]
    requantized = {m.name: m.requantized_from for m in ctx.campaign.models if m.requantized_from}
    measure(ctx.store, run_id=ctx.run_id, settings=settings, model_ids=ctx.model_ids, models=chosen,
            variants=[(m, v.name, v.args) for m, v in wanted], requantized=requantized, echo=ctx.echo)


def shapes(store: Store, model_ids: dict[str, int], names: list[str]) -> dict[str, dict]:
    """model -> its stored file and GGUF shape, and whether the file is on this machine."""
    out = {}
    for name in names:
        row = store.db.execute("select id, path, file_bytes, params, architecture, quantisation, basename, "
                               "tokenizer_sha256 from models where id = ?", [model_ids[name]]).fetchone()
        keys = ("id", "path", "file_bytes", "params", "architecture", "quantisation", "basename", "tokenizer_sha256")
        shape = dict(zip(keys, row)) if row else {}
        shape["on_disk"] = bool(shape.get("path")) and Path(shape["path"]).is_file()
        out[name] = shape
    return out


def measure(store: Store, *, run_id: int, settings: QualitySettings, model_ids: dict[str, int], models: list[str],
            variants: list[tuple[str, str, tuple[str, ...]]], requantized: dict[str, str],
            echo: Callable[[str], None] = print, binary: Path | None = None) -> list[dict]:
    """Every ladder of ``models`` and ``variants`` (model, variant name, its arguments); the stored rows."""
    shape = shapes(store, model_ids, models)
    for m, v, _args in variants:
        _variant_model(store, model_ids, m, derived_name(m, v))
    entries = [Entry(m, m, shape[m]) for m in models]
    extra = [Entry(derived_name(m, v), m, shape[m], v, tuple(perplexity_args(args))) for m, v, args in variants]
    decided = plan(entries, extra, requantized)
    rows = []
    for e, why in decided.refused:
        rows.append(_row(store, run_id, model_ids, e, None, settings, "refused", why, role=_role(e)))
        echo(f"quality {e.name}: refused: {english(why)}")
    if not decided.ladders:
        return rows
    try:
        tool = Path(settings.binary) if settings.binary else (binary or llamacpp.find_binary("llama-perplexity"))
        if not tool.is_file():
            raise llamacpp.LlamaServerMissing(f"{tool}: no such file")
        corpus = text.path()
    except (llamacpp.LlamaServerMissing, text.TextDamaged) as exc:
        error = {"error": Said.quoted(str(exc))}
        why = Said("the shipped text cannot be used: {error}", error) if isinstance(exc, text.TextDamaged) \
            else Said("no llama-perplexity to run here: {error}", error)
        for ladder in decided.ladders:
            for e in (ladder.base, *ladder.members, *ladder.variants):
                rows.append(_row(store, run_id, model_ids, e, ladder, settings, "refused", why, role=_role(e, ladder)))
        echo(f"quality: refused: {english(why)}")
        return rows
    for ladder in decided.ladders:
        rows += _ladder(store, run_id, model_ids, ladder, settings, tool, corpus, echo)
    return rows


def _variant_model(store: Store, model_ids: dict[str, int], model: str, name: str) -> None:
    """The variant's own model (``model~variant``), as ``[variants]`` registers it: where that table did not
    run (a campaign read again without it), its row is made the same way, so the figures have a model."""
    if name not in model_ids:
        base = store.db["models"].get(model_ids[model])
        model_ids[name] = store.upsert_model({k: v for k, v in base.items() if k != "id"} | {"name": name})


def _role(e: Entry, ladder: Ladder | None = None) -> str:
    if e.variant is not None:
        return "variant"
    return "base" if ladder is not None and e is ladder.base else "member"


def _ladder(store: Store, run_id: int, model_ids: dict[str, int], ladder: Ladder, settings: QualitySettings,
            tool: Path, corpus: Path, echo) -> list[dict]:
    """The base's logits once, then each member and variant against them; the logits deleted after."""
    folder = Path(store.path).parent
    with tempfile.TemporaryDirectory(dir=folder, prefix=".quality-logits-") as tmp:
        logits = Path(tmp) / "base.kld"
        common = ["-c", str(settings.context), *(["-t", str(settings.threads)] if settings.threads else [])]
        base_args = ["-m", ladder.base.shape["path"], "-f", str(corpus), "--chunks", str(settings.chunks),
                     "--kl-divergence-base", str(logits), *common]
        base = _process(store, run_id, model_ids, ladder.base, ladder, settings, tool, base_args, "base")
        echo(summary(ladder.base.name, base))
        rows = [base]
        if base["status"] != "measured":
            reason = Said.from_json(json.loads(base["reason_json"])) or base["reason_text"]
            why = Said("the base {base}'s logits could not be computed: {reason}",
                       {"base": ladder.base.name, "reason": reason})
            for e in (*ladder.members, *ladder.variants):
                rows.append(_row(store, run_id, model_ids, e, ladder, settings, "refused", why, role=_role(e)))
                echo(f"quality {e.name}: refused: {english(why)}")
            return rows
        for e in (*ladder.members, *ladder.variants):
            args = ["-m", e.shape["path"], "--kl-divergence-base", str(logits), "--kl-divergence", *common, *e.args]
            row = _process(store, run_id, model_ids, e, ladder, settings, tool, args, _role(e))
            echo(summary(e.name, row, ladder.base.name))
            rows.append(row)
    return rows


def _process(store: Store, run_id: int, model_ids: dict[str, int], e: Entry, ladder: Ladder,
             settings: QualitySettings, tool: Path, args: list[str], role: str) -> dict:
    """One llama-perplexity process as a load: run, its lines and facts stored, its row judged from them."""
    model_id = model_ids[e.name]
    load_id = store.insert("loads", {"run_id": run_id, "model_id": model_id, "trigger": "quality",
                                     "requested_at": utcnow(), "status": "loading", "model_file": e.shape["path"]})
    log = _log_path(store, run_id, load_id)
    started, t0 = utcnow(), time.monotonic()
    rc, pid, killed = _run_tool(tool, args, log, settings.timeout_s)
    seconds = round(time.monotonic() - t0, 3)
    sig = from_returncode(rc) if rc is not None and rc != 0 else None
    store.update("loads", load_id, {"pid": pid, "ended_at": utcnow(),
                                    "status": "failed" if killed or sig else "loaded",
                                    "end_reason": crash_end(sig) if sig else "quality measured",
                                    "exit_status": rc})
    pairs = store_lines(store, run_id, load_id, log) or []
    out = parse_output(pairs)
    _store_facts(store, load_id, out)
    status, why = _judge(out, role, rc, killed, sig, settings, pairs)
    return _row(store, run_id, model_ids, e, ladder, settings, status, why, role=role, load_id=load_id, out=out,
                args=args, tool=tool, seconds=seconds, log=log, started=started)


def _run_tool(tool: Path, args: list[str], log: Path, timeout_s: float) -> tuple[int | None, int | None, bool]:
    """The process's exit status, pid and whether it was stopped for taking too long; its output in ``log``."""
    with log.open("wb") as out:
        proc = subprocess.Popen([str(tool), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=llamacpp.server_env(tool), start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s), proc.pid, False
    except subprocess.TimeoutExpired:
        _kill(proc)
        return proc.returncode, proc.pid, True
    except BaseException:
        _kill(proc)  # interrupted: no llama-perplexity is left running behind the run
        raise


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def _judge(out: Output, role: str, rc, killed: bool, sig, settings: QualitySettings,
           pairs: list[tuple[int, str]]) -> tuple[str, Said | None]:
    """measured, refused (the text too short) or failed, from what the tool printed."""
    if killed:
        return "failed", Said("llama-perplexity did not finish within {seconds:,} s and was stopped",
                              {"seconds": round(settings.timeout_s)})
    if out.get("tokens_needed") is not None:
        return "refused", Said("the text is shorter than the context asked for: llama-perplexity needs "
                               "{needed:,} tokens for a context of {context:,} and the text gives {tokens:,} "
                               "with this tokenizer",
                               {"needed": out.get("tokens_needed"), "context": out.get("n_ctx_asked"),
                                           "tokens": out.get("text_tokens")})
    if sig is not None:
        return "failed", Said("llama-perplexity was killed by {signal}", {"signal": sig.key})
    chunks = out.get("chunks")
    if role == "base" and chunks is not None and chunks < settings.chunks:
        return "refused", Said("the text gives {chunks:,} chunks of {context:,} tokens with this tokenizer, "
                               "fewer than the {asked:,} asked for: the figures would not be of the campaign's "
                               "measurement", {"chunks": chunks, "context": out.get("n_ctx") or settings.context,
                                               "asked": settings.chunks})
    need = ("chunks", "final_ppl") if role == "base" else REQUIRED
    missing = out.missing(need)
    if missing or rc != 0:
        last = next((t for _, t in reversed(pairs) if t.strip()), "")
        return "failed", Said("llama-perplexity stated no {missing} (exit status {status}); its last line: "
                              "{line}", {"missing": ", ".join(missing) or "error", "status": rc,
                                         "line": Said.quoted(last[:300])})
    return "measured", None


def _store_facts(store: Store, load_id: int, out: Output) -> None:
    conn = store.db.conn
    with conn:
        for figure, (name, unit) in FACTS.items():
            value = out.get(figure)
            if value is not None:
                conn.execute("insert into facts (load_id, line_id, name, value_num, unit) values (?, ?, ?, ?, ?)",
                             [load_id, out.lines[figure], name, float(value), unit])


def _log_path(store: Store, run_id: int, load_id: int) -> Path:
    folder = Path(store.path).parent / "quality-logs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"run{run_id}-load{load_id}.log"
    path.unlink(missing_ok=True)  # a file left by an earlier store at this path: this process's lines only
    return path


def _row(store: Store, run_id: int, model_ids: dict[str, int], e: Entry, ladder: Ladder | None,
         settings: QualitySettings, status: str, why: Said | None, *, role: str, load_id: int | None = None,
         out: Output | None = None, args: list[str] | None = None, tool: Path | None = None,
         seconds: float | None = None, log: Path | None = None, started: str | None = None) -> dict:
    position = store.db.execute("select count(*) from quality_checks where run_id = ?", [run_id]).fetchone()[0]
    row = {"run_id": run_id, "position": position, "model_id": model_ids.get(e.name), "load_id": load_id,
           "base_model_id": model_ids.get(ladder.base.name) if ladder else None, "role": role,
           "variant": e.variant, "status": status, "reason_text": english(why) if why else None,
           "reason_json": json_text(why.to_json()) if why else None,
           "requantized_from": ladder.requantized_from if ladder else None,
           "text_name": text.ALICE.name, "text_sha256": text.ALICE.sha256, "context_tokens": settings.context,
           "chunks_asked": settings.chunks, "binary": str(tool) if tool else None,
           "args_json": json_text(args) if args is not None else None, "seconds": seconds,
           "log_path": str(log) if log else None, "started_at": started or utcnow(), "ended_at": utcnow()}
    if out is not None:
        row["chunks"] = out.get("chunks")
        if status == "measured":
            row |= {k: out.get(k) for k in FIGURES}
            if role == "base":
                row |= {"ppl": out.get("final_ppl"), "ppl_err": out.get("final_ppl_err")}
        row["evidence_json"] = json_text({k: v for k, v in sorted(out.lines.items())})
    row["id"] = store.insert("quality_checks", row)
    return row


def summary(name: str, row: dict, base: str | None = None) -> str:
    """One progress line: the figures, or why there are none."""
    head = f"quality {name}" + (f" against {base}" if base else " (base)")
    if row["status"] != "measured":
        return f"{head}: {row['status']}: {row['reason_text']}"
    where = f"{row.get('chunks')} chunks of {row['context_tokens']} tokens"
    if row["role"] == "base":
        return f"{head}: PPL {row['ppl']:.4g} ± {row['ppl_err']:.3g} ({where})"
    return (f"{head}: KLD {row['kld_mean']:.4g} ± {row['kld_mean_err']:.2g}, p99 {row['kld_p99']:.4g}, "
            f"same top {row['same_top']:.1f} %, PPL {row['ppl']:.4g} ± {row['ppl_err']:.3g} ({where})")
