"""Quality beside speed: each ladder member and variant placed on decode against KL divergence from its base.

A quantisation or a KV-cache type buys speed and memory with answers; this
finding puts both on one line per member ("Q8_0: ×1.44 decode, KLD 0.0004"),
from the run's own stable cells and llama-perplexity's own lines
(``view["quality"]``, report/quality.py). A decode ratio is given only where
the samples show it beyond their scatter. Its caveat says what KL divergence
over one text does and does not show, and where the base was itself
requantized, that its figures measure rounding between files of the same
weights.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Term
from .stable import cells_measurable

TITLE = N_("Quality beside speed")
TEXT = N_("Against {base}, the ladder's base, over {chunks} chunks of {context} tokens of the shipped text: {models} "
          "keep the base's top token at {same_low} to {same_high} of positions, with a mean KL divergence from "
          "{kld_low} to {kld_high}; decode in the prompt class {cls} is {tps_base} tok/s for the base.")
TEXT_ONE = N_("Against {base}, the ladder's base, over {chunks} chunks of {context} tokens of the shipped text: "
              "{models} keeps the base's top token at {same_low} of positions, with a mean KL divergence of "
              "{kld_low}; decode in the prompt class {cls} is {tps_base} tok/s for the base.")
MEMBER = N_("{model} ({quant}): decode {ratio} ({tps} tok/s), KL divergence {kld} ± {err}, 99th percentile {p99}, same top token {same}")
NOT_MEASURABLE = N_("no measurable change")
CONDITION = N_("Every member was read by llama-perplexity with the base's logits over the same tokens, and its GGUF "
               "header names the base's tokenizer; the figures are the tool's own lines. Decode comes from stable cells "
               "and is given as a ratio only where it differs beyond the samples' scatter.")
CAVEAT = N_("KL divergence over one English literary text at one context size shows how far each format moves the "
            "next-token distributions on that text; it does not show how answers to other tasks, other languages or "
            "long contexts change, and a small mean can hide rare large changes (the 99th percentile shows the worst "
            "positions).")
CAVEAT_REQUANTIZED = N_("{base} was itself requantized from {source}, so every file here carries the same weights: "
                        "these KL divergences measure rounding between the formats, not what quantising the original "
                        "model lost (a check of the ladder's \"same weights\"). Over one text at one context size, and "
                        "a small mean can hide rare large changes.")


def check(view: dict) -> list[Finding]:
    out = []
    for ladder in (view.get("quality") or {}).get("ladders", []):
        found = _ladder(ladder)
        if found is not None:
            out.append(found)
    return out


def _ladder(ladder: dict) -> Finding | None:
    base = next((e for e in ladder["rows"] if e["role"] == "base" and e["status"] == "measured"), None)
    if base is None or not base.get("decode"):
        return None
    steps = [e for e in ladder["rows"] if e["role"] != "base" and e["status"] == "measured" and e.get("decode")
             and e.get("kld_mean") is not None and e.get("same_top") is not None]
    if not steps:
        return None
    steps.sort(key=lambda e: e["kld_mean"])
    tps_base = base["decode"]["value"]

    def ratio(e: dict):
        if not cells_measurable(base["decode"]["cell"], e["decode"]["cell"]):
            return Term(NOT_MEASURABLE)
        return Fig(e["decode"]["value"] / tps_base, "ratio")

    figures = tuple(Line(MEMBER, {
        "model": e["model"], "quant": e["variant"] or e["quantisation"] or "—", "ratio": ratio(e),
        "tps": Fig(e["decode"]["value"], link=e["decode"]["link"]),
        "kld": Fig(e["kld_mean"], digits=6, link=_line(e, "kld_mean")), "err": Fig(e["kld_mean_err"], digits=6),
        "p99": Fig(e["kld_p99"], digits=6, link=_line(e, "kld_p99")),
        "same": Fig(e["same_top"] / 100, "pct", 1, link=_line(e, "same_top"))}) for e in steps)
    same = sorted(e["same_top"] for e in steps)
    params = {"base": ladder["base"], "chunks": Fig(base.get("chunks"), "int"),
              "context": Fig(base.get("context_tokens"), "int"), "models": [e["model"] for e in steps],
              "same_low": Fig(same[0] / 100, "pct", 1), "same_high": Fig(same[-1] / 100, "pct", 1),
              "kld_low": Fig(steps[0]["kld_mean"], digits=6, link=_line(steps[0], "kld_mean")),
              "kld_high": Fig(steps[-1]["kld_mean"], digits=6, link=_line(steps[-1], "kld_mean")),
              "cls": Term(ladder["cls"]), "tps_base": Fig(tps_base, link=base["decode"]["link"])}
    caveat = Line(CAVEAT_REQUANTIZED, {"base": ladder["base"], "source": ladder["requantized_from"]}) \
        if ladder.get("requantized_from") else Line(CAVEAT)
    key = "quality:" + "|".join(sorted([ladder["base"], *(e["model"] for e in steps)]))
    text = TEXT_ONE if len(steps) == 1 else TEXT  # one member: no range "from x to x", no plural verb
    return Finding("quality", key, TITLE, text, params, figures, Line(CONDITION), caveat)


def _line(e: dict, figure: str) -> str | None:
    line = e["cite"].get(figure)
    return f"line-{line}" if line is not None else None


RULE = FindingRule("quality", check, order=25)
