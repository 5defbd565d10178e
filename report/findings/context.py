"""Context costs: what a filled context does to decode, per 1,000 tokens, and the largest context that fits.

Every token of context is read again for each new token, so decode slows as
the prompt grows; how much is what a reader planning long conversations or
retrieval needs. From the depth steps: decode at the deepest depth that
differs measurably from the shallowest, as a change per 1,000 prompt tokens.
From the fit test: the largest context that fits on the cards, and the first
that did not.
"""

from __future__ import annotations

from cardproof.marks import N_, NP_
from ..stats import spread
from .base import Fig, Finding, FindingRule, Line, Quote
from .pick import spread_unstable
from .stable import measurable

TITLE = N_("Context costs: {model}")
TEXT = N_("{model} decodes at {tps_deep} tok/s with {tokens_deep} tokens of context against {tps_base} tok/s with "
          "{tokens_base} tokens: {per_1000} per 1,000 tokens of context.")
TEXT_FIT = N_("{model}: the largest context that fits on the cards is {fits} tokens.")
TEXT_FIT_NOT = N_("{model}: the largest context that fits on the cards is {fits} tokens; {next} tokens did not fit.")
TEXT_BOTH = N_("{model} decodes at {tps_deep} tok/s with {tokens_deep} tokens of context against {tps_base} tok/s with "
               "{tokens_base} tokens: {per_1000} per 1,000 tokens of context. The largest context that fits on the cards "
               "is {fits} tokens.")
TEXT_BOTH_NOT = N_("{model} decodes at {tps_deep} tok/s with {tokens_deep} tokens of context against {tps_base} tok/s "
                   "with {tokens_base} tokens: {per_1000} per 1,000 tokens of context. The largest context that fits on "
                   "the cards is {fits} tokens; {next} tokens did not fit.")
STEP = N_("depth {depth}: {tokens} prompt tokens, decode {tps} tok/s (n={n})")
STEP_NOT = N_("depth {depth}: {tokens} prompt tokens, decode {tps} tok/s (n={n}), no measurable difference from the first")
FITS = N_("context {context}: fits")
FITS_NOT = N_("context {context}: does not fit")
CONDITION = N_("Decode is compared only where a depth differs from the shallowest beyond the samples' scatter (ranges "
               "apart and Welch's t-test at 5 %) and neither step is unstable.")
CONDITION_BOTH = N_("Decode is compared only where a depth differs from the shallowest beyond the samples' scatter "
                    "(ranges apart and Welch's t-test at 5 %) and neither step is unstable; the fit from the fit test's "
                    "own verdicts.")
CONDITION_FIT = N_("From the fit test's own verdicts: every layer on the cards, no KV cache on the CPU, the request answered.")
CAVEAT = N_("One request at a time, the context filled with cardproof's filler text: a straight line through two depths, "
            "and decode need not fall evenly between them. More slots or another KV cache type change the cost, and so "
            "may flash attention, which the load's log does not state.")
CAVEAT_SETTINGS = NP_("One request at a time, the context filled with cardproof's filler text: a straight line through "
                      "two depths, and decode need not fall evenly between them. The cost holds for the settings the "
                      "load's log states (flash attention {fa}, KV cache {kv_k}/{kv_v}, {slots} slot); with others it "
                      "differs.",
                      "One request at a time, the context filled with cardproof's filler text: a straight line through "
                      "two depths, and decode need not fall evenly between them. The cost holds for the settings the "
                      "load's log states (flash attention {fa}, KV cache {kv_k}/{kv_v}, {slots} slots); with others it "
                      "differs.")
CAVEAT_FIT = N_("A context that fits alone may not fit beside another model, and one slot was asked for: a server with "
                "several slots needs room for each.")


def _speed(view: dict, model: str) -> dict | None:
    """The deepest measurable depth against the shallowest: steps, figures and the figure lines."""
    entry = next((e for e in view.get("depth_steps") or [] if e["model"] == model), None)
    if not entry:
        return None
    steps = [s | {"spread": spread(s["values"])} for s in entry["steps"]
             if not s["refused"] and s["values"] and isinstance(s.get("tokens"), (int, float))]
    steps = [s for s in steps if not spread_unstable(s["spread"], view)]
    if len(steps) < 2:
        return None
    steps.sort(key=lambda s: s["tokens"])
    base = steps[0]
    apart = [s for s in steps[1:] if s["tokens"] > base["tokens"]
             and measurable(base["spread"], s["spread"], base["values"], s["values"])]
    if not apart:
        return None
    deep = apart[-1]

    def fig(s):
        return Fig(s["spread"].median, link=f"step-{s['id']}")

    lines = [Line(STEP if s is base or s in apart else STEP_NOT,
                  {"depth": Fig(s["depth"], "int"), "tokens": Fig(s["tokens"], "int"), "tps": fig(s),
                   "n": s["spread"].n}) for s in steps]
    change = (deep["spread"].median / base["spread"].median - 1) / ((deep["tokens"] - base["tokens"]) / 1000) \
        if base["spread"].median else None
    return {"lines": lines, "params": {"tps_deep": fig(deep), "tokens_deep": Fig(deep["tokens"], "int"),
                                       "tps_base": fig(base), "tokens_base": Fig(base["tokens"], "int"),
                                       "per_1000": Fig(change, "signed_pct")}}


def _fit(view: dict, model: str) -> dict | None:
    entry = next((e for e in view.get("fit") or [] if e.get("model") == model), None)
    if not entry or entry.get("max_context") is None:
        return None
    rows = [r for r in entry["rows"] if r.get("context") is not None]
    fits = max((r for r in rows if r["verdict"] == "fits"), key=lambda r: r["context"])
    beyond = min((r for r in rows if r["verdict"] == "does_not_fit" and r["context"] > fits["context"]),
                 key=lambda r: r["context"], default=None)
    out = {"fits": Fig(fits["context"], "int", link=f"fit-{fits['id']}"),
           "lines": [Line(FITS, {"context": Fig(fits["context"], "int", link=f"fit-{fits['id']}")})]}
    if beyond:
        out["next"] = Fig(beyond["context"], "int", link=f"fit-{beyond['id']}")
        out["lines"].append(Line(FITS_NOT, {"context": out["next"]}))
    return out


def _caveat(view: dict, model: str) -> Line:
    """The depth caveat naming the settings the load ran with, never one it already had as a change."""
    entry = next((e for e in view.get("depth_steps") or [] if e["model"] == model), {})
    st = entry.get("settings") or {}
    if all(k in st for k in ("flash_attn", "kv_cache_type_k", "kv_cache_type_v", "slots")):
        return Line(CAVEAT_SETTINGS, {"fa": Quote(str(st["flash_attn"])), "kv_k": Quote(str(st["kv_cache_type_k"])),
                                      "kv_v": Quote(str(st["kv_cache_type_v"])), "slots": Fig(st["slots"], "int")},
                    count="slots")
    return Line(CAVEAT)


def check(view: dict) -> list[Finding]:
    models = [m["name"] for m in view["models"]]
    models += [e["model"] for e in view.get("fit") or [] if e.get("model") not in models]
    out = []
    for model in models:
        speed, fit = _speed(view, model), _fit(view, model)
        if not speed and not fit:
            continue
        params = {"model": model}
        lines = []
        if speed:
            params |= speed["params"]
            lines += speed["lines"]
        if fit:
            params["fits"] = fit["fits"]
            if "next" in fit:
                params["next"] = fit["next"]
            lines += fit["lines"]
        if speed and fit:
            text = TEXT_BOTH_NOT if "next" in params else TEXT_BOTH
        elif speed:
            text = TEXT
        else:
            text = TEXT_FIT_NOT if "next" in params else TEXT_FIT
        condition = (CONDITION_BOTH if fit else CONDITION) if speed else CONDITION_FIT
        out.append(Finding("context", f"context:{model}", TITLE, text, params, tuple(lines), Line(condition),
                           _caveat(view, model) if speed else Line(CAVEAT_FIT)))
    return out


RULE = FindingRule("context", check, order=40)
