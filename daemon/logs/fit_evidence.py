"""What one fit load's log says, and the verdict it supports: fits, does not fit, or not on a card.

Everything here is read from the server's own lines (the parsers of
``daemon/logs/parsers``) plus the card reading and the one request; nothing
is estimated. Each figure keeps the ids of the log lines it was read from,
so the article can link a number to its evidence. A line the parsers cannot
read is skipped like any line without a fact -- a malformed log never stops
the test.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from cardproof.marks import N_
from cardproof.daemon.logs.lines import clean
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.logs.attribution import scope_facts
from cardproof.daemon.memory.readings import is_card_device
from cardproof.daemon.store.said import Said

# "print_info: n_ctx_train = 16384"; older "llm_load_print_meta: n_ctx_train = 163840"
_N_CTX_TRAIN = re.compile(r"\bn_ctx_train\s+=\s+(\d{1,12})\b")
# the allocator's own words when a buffer does not fit (CUDA, HIP, Vulkan, Metal, ggml's allocator);
# "failed to mlock ... Cannot allocate memory" is a warning about pinning host pages, not a failed buffer
_OOM = re.compile(r"out of memory|cudaMalloc failed|hipMalloc failed|ErrorOutOfDeviceMemory|"
                  r"failed to allocate|unable to allocate|insufficient memory|cannot allocate memory", re.IGNORECASE)
# why a load ended early, in the loader's words ("failed to load model", "error loading model: ...")
_LOAD_ERROR = re.compile(r"failed to load|error loading|failed to read|failed to create|exception", re.IGNORECASE)
_NOT_OOM = re.compile(r"mlock|this warning is normal during memory fitting", re.IGNORECASE)

# Metal names its device MTL0, MTL1 in buffer lines: GPU memory (unified on Apple silicon, but the GPU's share)
_METAL = re.compile(r"^MTL\d+$")


def on_card(device: str | None) -> bool:
    """A llama.cpp device name that is a GPU's memory, Metal's ``MTL0`` included."""
    return is_card_device(device) or bool(device and _METAL.match(device))


#: buffer facts shown per device, in the order a reader thinks of them
_TARGET = ("model_buffer_mib", "kv_buffer_mib", "kv_swa_buffer_mib", "rs_buffer_mib", "compute_buffer_mib",
           "output_buffer_mib", "projector_compute_mib", "lora_buffer_mib")
# a draft model's buffers are card memory too: kept under their own names, counted in the same totals
BUFFERS = _TARGET + tuple("draft_" + n for n in _TARGET)
KV = ("kv_buffer_mib", "kv_swa_buffer_mib", "draft_kv_buffer_mib", "draft_kv_swa_buffer_mib")


@dataclass
class LoadEvidence:
    """The facts of one fit load's log, each with the line ids it rests on."""

    offloaded_layers: int | None = None
    total_layers: int | None = None
    ctx_size: int | None = None
    n_ctx_train: int | None = None
    buffers: dict[str, dict[str, float]] = field(default_factory=dict)  # device -> fact -> MiB
    oom_lines: list[str] = field(default_factory=list)  # the allocator's words, verbatim (first few)
    error_lines: list[str] = field(default_factory=list)  # the loader's words when it gave up (first few)
    evidence: dict[str, list[int]] = field(default_factory=dict)  # figure -> log line ids

    def cite(self, figure: str, line_id: int) -> None:
        ids = self.evidence.setdefault(figure, [])
        if line_id not in ids:
            ids.append(line_id)

    @property
    def kv_card_mib(self) -> float:
        return round(sum(v for d, f in self.buffers.items() if on_card(d)
                         for k, v in f.items() if k in KV), 3)

    @property
    def kv_host_mib(self) -> float:
        return round(sum(v for d, f in self.buffers.items() if not on_card(d)
                         for k, v in f.items() if k in KV), 3)

    @property
    def on_card(self) -> bool:
        """Some buffer lies on a card, or the log says layers went to one."""
        return any(on_card(d) for d in self.buffers) or bool(self.offloaded_layers)


def read_lines(lines: list[tuple[int, str]]) -> LoadEvidence:
    """The evidence in ``(line_id, raw)`` pairs of one load's log, in order.

    A second model in the same log (a draft model) has its buffers renamed
    ``draft_*`` by :func:`scope_facts` and counted apart; the first
    ``offloaded`` and ``n_ctx`` lines are the target model's.
    """
    ev = LoadEvidence()
    in_draft = in_swa = False
    for line_id, raw in lines:
        _port, _pid, text = clean(raw)
        in_draft, in_swa = _phase(text, in_draft, in_swa)
        m = _N_CTX_TRAIN.search(text)
        if m and ev.n_ctx_train is None:
            ev.n_ctx_train = int(m[1])
            ev.cite("n_ctx_train", line_id)
        if _OOM.search(text) and not _NOT_OOM.search(text):
            if len(ev.oom_lines) < 3:
                ev.oom_lines.append(text.strip()[:300])
            ev.cite("oom", line_id)
        elif _LOAD_ERROR.search(text) and not _NOT_OOM.search(text) and len(ev.error_lines) < 3:
            ev.error_lines.append(text.strip()[:300])
            ev.cite("error", line_id)
        for f in scope_facts(parse_line(text), in_draft, in_swa):
            _take(ev, f, line_id)
    return ev


def _phase(text: str, in_draft: bool, in_swa: bool) -> tuple[bool, bool]:
    """Whether the line falls in a draft model's load or a sliding-window cache (as the log importer reads it)."""
    if "KV cache" in text and "creating" in text:
        in_swa = "non-SWA" not in text and "SWA KV cache" in text
    elif "kv_cache: size" in text:  # the summary after a cache's buffer lines ends its scope
        in_swa = False
    if "loading draft model" in text or "creating MTP draft context" in text:
        in_draft = True
    elif "speculative decoding context initialized" in text or "model loaded" in text \
            or "load_model: initializing" in text:
        in_draft = False
    return in_draft, in_swa


def _take(ev: LoadEvidence, f, line_id: int) -> None:
    if f.name == "offloaded_layers" and ev.offloaded_layers is None:
        ev.offloaded_layers = int(f.value_num)
        ev.cite("layers", line_id)
    elif f.name == "total_layers" and ev.total_layers is None:
        ev.total_layers = int(f.value_num)
    elif f.name in ("ctx_size", "slot_ctx_size") and f.value_num is not None:
        # llama_context's n_ctx is the whole cache; a slot's is what one request gets: the first said wins
        if ev.ctx_size is None:
            ev.ctx_size = int(f.value_num)
            ev.cite("ctx", line_id)
    elif f.name in BUFFERS and f.device and f.value_num is not None:
        per = ev.buffers.setdefault(f.device, {})
        per[f.name] = round(per.get(f.name, 0.0) + f.value_num, 3)
        ev.cite("kv" if f.name in KV else "buffers", line_id)
        ev.cite(f"device:{f.device}", line_id)  # each device's figure links to its own lines


@dataclass
class Verdict:
    verdict: str  # fits | does_not_fit | not_on_card | unknown
    reasons: list[Said]  # why not (does_not_fit), or what a CPU-only load still shows
    missing: list[str]  # evidence a "fits" would need and the load did not give: the verdict rests on the rest


def judge(ev: LoadEvidence, *, context_tokens: int, load_error: str | None, request_error: str | None,
          card_readable: bool) -> Verdict:
    """The verdict of one context from its evidence; every reason names its figure."""
    reasons: list[Said] = []
    missing: list[str] = []
    if load_error is not None:
        said = ev.error_lines[0] if ev.error_lines else load_error
        reasons.append(Said("the load failed: {error}", {"error": Said.quoted(said[:300])}))
    for text in ev.oom_lines[:1]:
        reasons.append(Said("out of memory in the log: {line}", {"line": Said.quoted(text)}))
    on_card = ev.on_card
    if on_card and ev.offloaded_layers is not None and ev.total_layers is not None \
            and ev.offloaded_layers < ev.total_layers:
        reasons.append(Said("{on_cpu:,} of {total:,} layers on the CPU",
                            {"on_cpu": ev.total_layers - ev.offloaded_layers, "total": ev.total_layers}))
    if on_card and ev.kv_host_mib > 0:
        reasons.append(Said("KV cache on the CPU: {mib:,.1f} MiB", {"mib": ev.kv_host_mib}))
    if load_error is None and ev.ctx_size is not None and ev.ctx_size < context_tokens:
        reasons.append(Said("the server built a context of {built:,} tokens, not {asked:,}",
                            {"built": ev.ctx_size, "asked": context_tokens}))
    if load_error is None and request_error is not None:
        reasons.append(Said("the request failed: {error}", {"error": Said.quoted(request_error[:300])}))
    if reasons:
        return Verdict("does_not_fit", reasons, missing)
    if not on_card and not ev.buffers:
        # a log without a single buffer line proves neither a card nor the CPU: no verdict is guessed
        return Verdict("unknown", [Said("the log names no buffer and no offloaded layers", {})], missing)
    if not on_card:
        # plainly: nothing of this load is on a card; its buffers are still reported beside the verdict
        return Verdict("not_on_card", [], missing)
    if ev.offloaded_layers is None:
        missing.append(N_("offloaded layers"))
    if not any(k in KV for f in ev.buffers.values() for k in f):
        missing.append("KV buffer")
    if ev.ctx_size is None:
        missing.append("context size")
    if not card_readable:
        missing.append("card memory")
    return Verdict("fits", [], missing)


def rule_values(conn, run_id: int, model_id: int) -> dict:
    """``fit.max_context``: the largest context of the model's fit test that fits on the cards.

    0 when contexts were tested and none fits (a CPU-only machine's "not on a
    card" included); absent without a fit test, so a rule over it stays undecided.
    """
    try:
        rows = conn.execute("select context_tokens, verdict from fit_checks where run_id = ? and model_id = ? "
                            "and verdict in ('fits', 'does_not_fit', 'not_on_card')", [run_id, model_id]).fetchall()
    except sqlite3.OperationalError:  # a database from before the fit test
        return {}
    if not rows:
        return {}
    return {"fit.max_context": float(max((c for c, v in rows if v == "fits"), default=0))}
