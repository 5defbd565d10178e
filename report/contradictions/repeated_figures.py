"""The same figure, measured in separate blocks of one run, disagrees between the blocks.

A run measures a model's one-stream decode rate on a short prompt more than
once: in its main cells, in the ``[load]`` step at one stream, in the
``[depth]`` step at depth 0 and, where the server's counters are stored with
them, in the probes' requests. The blocks run one after the other, so where
they disagree the machine's speed moved between them (another process, heat,
the host), or one block measures something the others do not; which one is
not decided here. Each block's figures are compared with every other
block's under the same conditions: model, prompt class (a step or probe
prompt joins the class whose measured prompt size is nearest, within a
factor of four), reasoning, one stream.

"Disagree": the min–max ranges do not overlap, and ranges of one source come
apart like that at most one time in twenty (``findings.stable.measurable`` on
the spreads: every figure of one block beyond every figure of the other
happens by chance 2 / C(na + nb, na) of the time; two blocks of two samples
from one source come apart one time in three, four against four one time in
35). It is a test of the ranges themselves, so a block that scatters widely
(a machine that stalled now and then) does not hide a separation, as it
does from Welch's t-test, which the findings use.
"""

from __future__ import annotations

import json
import math
import tomllib
from datetime import datetime

from ..findings.stable import measurable
from ..gates import excluded_samples
from ..i18n import Lang
from ..stats import spread
from .base import Contradiction, Detector, Side

#: a step's or probe's prompt joins a class only within this factor of the class's measured prompt size
_CLASS_FACTOR = 4.0
#: a probe answer shorter than this gives no decode rate worth comparing (its counter spans one interval)
_MIN_PROBE_TOKENS = 2

def _(message: str) -> str:
    """A message id of the catalogue, marked for its extractor; each language says it through ``Lang.gettext``."""
    return message


#: block kind -> its name in a sentence
_BLOCKS = {
    "cells": _("main cells"),
    "load": _("load step at 1 stream"),
    "depth": _("depth step at 0 tokens"),
    "probes": _("probe requests"),
}

TITLE = _("{model}: decode at one stream, {prompt_class} prompt, {reasoning}, disagrees between blocks "
          "measured one after the other: {blocks}")
SIDE = _("{block}: {low}–{high} tok/s (median {median}, n = {n}), measured {start}–{end} s after the run began.")
SIDE_AT = _("{block}: {low}–{high} tok/s (median {median}, n = {n}), measured {start} s after the run began.")
AGAINST = _("{first} against {second}")
_LANGS = {code: Lang(code) for code in ("en", "de")}


class _Block:
    """One block's figures: (decode tok/s, anchor of the row, start time) each, and the block's own anchor."""

    def __init__(self, kind: str, anchor: str):
        self.kind, self.anchor = kind, anchor
        self.figures: list[tuple[float, str, str | None]] = []

    def add(self, tps, anchor: str, at: str | None) -> None:
        if isinstance(tps, (int, float)) and not isinstance(tps, bool) and math.isfinite(tps) and tps > 0:
            self.figures.append((float(tps), anchor, at))

    @property
    def values(self) -> list[float]:
        return [f[0] for f in self.figures]


def detect(db, view: dict) -> list[Contradiction]:
    """One open contradiction per model, prompt class and reasoning whose blocks disagree."""
    run = view["run"]
    groups: dict[tuple, list[_Block]] = {}
    for model in view["models"]:
        for (cls, reasoning), cell in model["cells"].items():
            block = _Block("cells", f"cell-{cell['id']}")
            for s in cell["valid"]:
                block.add(s["decode_tps"], f"sample-{s['id']}", s["started_at"])
            groups.setdefault((model["name"], cls, bool(reasoning)), []).append(block)
    measured = {m["name"] for m in view["models"]}
    sizes = _class_sizes(view)
    for key, block in _step_blocks(db, run["id"], sizes) + _probe_blocks(db, run, sizes):
        if key[0] in measured:
            groups.setdefault(key, []).append(block)
    out = []
    for (model, cls, reasoning), blocks in groups.items():
        found = _disagreeing(blocks)
        if found:
            out.append(_contradiction(model, cls, reasoning, found, run.get("started_at")))
    return out


def _class_sizes(view: dict) -> dict[str, float]:
    """Prompt class -> its measured prompt size in tokens (the geometric middle of the cells' min–max)."""
    sizes = {}
    for cls, span in (view.get("class_tokens") or {}).items():
        if span and span[0] and span[0] > 0 and span[1]:
            sizes[cls] = math.sqrt(span[0] * span[1])
    return sizes


def _class_of(tokens, sizes: dict[str, float]) -> str | None:
    """The class whose measured prompt size is nearest ``tokens`` on a log scale, within the factor; else None."""
    if not isinstance(tokens, (int, float)) or tokens <= 0 or not sizes:
        return None
    cls, size = min(sizes.items(), key=lambda kv: abs(math.log(tokens / kv[1])))
    return cls if abs(math.log(tokens / size)) <= math.log(_CLASS_FACTOR) else None


def _step_blocks(db, run_id: int, sizes: dict[str, float]) -> list[tuple[tuple, _Block]]:
    """The ``[load]`` steps at one stream and the ``[depth]`` steps at depth 0, each a block of its answered samples."""
    if "load_steps" not in db.table_names():
        return []
    excluded = excluded_samples(db, run_id)
    steps: dict[int, dict] = {}
    blocks: dict[int, _Block] = {}
    tokens: dict[int, list[int]] = {}
    for r in db.query(
            """select load_steps.id as step_id, load_steps.axis, load_steps.prompt_class, models.name as model,
                      samples.id as sample_id, samples.decode_tps, samples.prompt_tokens, samples.started_at
               from load_steps join models on models.id = load_steps.model_id
               join samples on samples.cell_id = load_steps.cell_id
               where load_steps.run_id = ? and samples.error_kind is null
                 and ((load_steps.axis = 'load' and load_steps.streams = 1)
                      or (load_steps.axis = 'depth' and load_steps.depth_tokens = 0))
               order by load_steps.id, samples.id""", [run_id]):
        if r["sample_id"] in excluded:
            continue
        sid = r["step_id"]
        if sid not in steps:
            steps[sid], blocks[sid], tokens[sid] = r, _Block(r["axis"], f"step-{sid}"), []
        blocks[sid].add(r["decode_tps"], f"sample-{r['sample_id']}", r["started_at"])
        if isinstance(r["prompt_tokens"], int):
            tokens[sid].append(r["prompt_tokens"])
    out = []
    for sid, step in steps.items():
        # a load step's prompt is its class's own; a depth-0 prompt joins the class nearest its size
        cls = step["prompt_class"] if step["axis"] == "load" else _class_of(_middle(tokens[sid]), sizes)
        if cls is not None:
            out.append(((step["model"], cls, False), blocks[sid]))
    return out


def _probe_blocks(db, run: dict, sizes: dict[str, float]) -> list[tuple[tuple, _Block]]:
    """The probes' requests whose answers carry the server's counters, one block per model, class and reasoning."""
    if "probe_results" not in db.table_names():
        return []
    default_reasoning = _probe_reasoning(run.get("campaign_text"))
    blocks: dict[tuple, _Block] = {}
    for r in db.query("""select probe_results.id, probe_results.exchange_json, probe_results.at, models.name as model
                         from probe_results join models on models.id = probe_results.model_id
                         where probe_results.run_id = ? order by probe_results.id""", [run["id"]]):
        try:
            exchange = json.loads(r["exchange_json"] or "{}")
        except (ValueError, RecursionError):
            continue
        if not isinstance(exchange, dict):
            continue
        requests = exchange.get("requests") if isinstance(exchange.get("requests"), list) else []
        responses = exchange.get("responses") if isinstance(exchange.get("responses"), list) else []
        for i, resp in enumerate(responses):
            timings = resp.get("timings") if isinstance(resp, dict) else None
            if not isinstance(timings, dict) or not _count(timings.get("predicted_n"), _MIN_PROBE_TOKENS):
                continue
            cls = _class_of(timings.get("prompt_n"), sizes)
            if cls is None:
                continue
            body = requests[i] if i < len(requests) and isinstance(requests[i], dict) else {}
            kwargs = body.get("chat_template_kwargs") if isinstance(body.get("chat_template_kwargs"), dict) else {}
            reasoning = kwargs.get("enable_thinking", default_reasoning) is True
            key = (r["model"], cls, reasoning)
            blocks.setdefault(key, _Block("probes", f"probe-{r['id']}")).add(
                timings.get("predicted_per_second"), f"probe-{r['id']}", r["at"])
    return list(blocks.items())


def _probe_reasoning(campaign_text: str | None) -> bool:
    """The frozen campaign's ``[probes] reasoning``: what a probe request sends unless it says otherwise."""
    try:
        return tomllib.loads(campaign_text or "").get("probes", {}).get("reasoning", False) is True
    except (tomllib.TOMLDecodeError, AttributeError):
        return False


def _count(value, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _middle(values: list[int]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def _disagreeing(blocks: list[_Block]) -> list[tuple[_Block, _Block]]:
    """Every pair of blocks (in the order they were measured) whose figures differ by the report's rule."""
    usable = sorted((b for b in blocks if len(b.figures) >= 2), key=lambda b: min(f[2] or "" for f in b.figures))
    pairs = []
    for i, a in enumerate(usable):
        for b in usable[i + 1:]:
            if measurable(spread(a.values), spread(b.values)):
                pairs.append((a, b))
    return pairs


def _offset(at: str | None, began: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(at) - datetime.fromisoformat(began)).total_seconds()
    except (TypeError, ValueError):
        return None


def _side(block: _Block, began: str | None) -> tuple[dict, tuple]:
    """A block's sentence in both languages, and its anchors: the block, its lowest and its highest figure."""
    s = spread(block.values)
    low = min(block.figures, key=lambda f: f[0])
    high = max(block.figures, key=lambda f: f[0])
    times = [t for t in (_offset(f[2], began) for f in block.figures) if t is not None]
    text = {}
    for code, L in _LANGS.items():
        start, end = (L.num(min(times), 0), L.num(max(times), 0)) if times else ("—", "—")
        text[code] = L.gettext(SIDE if start != end else SIDE_AT).format(
            block=L.gettext(_BLOCKS[block.kind]), low=L.num(s.low, 1), high=L.num(s.high, 1),
            median=L.num(s.median, 1), n=s.n, start=start, end=end)
        text[code] = text[code][:1].upper() + text[code][1:]  # the block's name opens the sentence
    return text, tuple(dict.fromkeys((block.anchor, low[1], high[1])))


def _contradiction(model: str, cls: str, reasoning: bool, pairs, began: str | None) -> Contradiction:
    """Side a: the first block of the first disagreeing pair; side b: every other block in a disagreeing pair."""
    first = pairs[0][0]
    others = list(dict.fromkeys(b for pair in pairs for b in pair if b is not first))
    a_text, a_ev = _side(first, began)
    b_parts = [_side(b, began) for b in others]
    title = {}
    for code, L in _LANGS.items():
        blocks = "; ".join(L.gettext(AGAINST).format(first=L.gettext(_BLOCKS[a.kind]), second=L.gettext(_BLOCKS[b.kind]))
                           for a, b in pairs)
        title[code] = L.gettext(TITLE).format(
            model=model, prompt_class=L.gettext(cls),
            reasoning=L.gettext("reasoning on") if reasoning else L.gettext("reasoning off"), blocks=blocks)
    b_text = {code: " ".join(p[0][code] for p in b_parts) for code in _LANGS}
    b_ev = tuple(dict.fromkeys(e for p in b_parts for e in p[1]))
    key = f"repeated:{model}:{cls}:{int(reasoning)}"
    return Contradiction(key, title, Side(a_text, a_ev), Side(b_text, b_ev))


DETECTOR = Detector("repeated_figures", detect)
