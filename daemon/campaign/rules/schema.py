"""The names a pass rule may read, and their types.

A rule is checked against these when the campaign is read, so a typo is an
error before the run (exit 2), not an "undecided" after it. The values come
from ``facts.py`` once the run has measured.

- load facts from the log (as the parsers in daemon/logs/parsers/ name them): ``offloaded_layers``,
  ``total_layers``, ``ctx_size``, ``kv_cache_type_k``, ... Buffer sizes are
  summed over the cards (``kv_buffer_mib``) or read per device
  (``kv_buffer_mib.CUDA0``).
- ``load_seconds`` (median over the model's loads in the run), ``card_mib``
  (memory measured on the card for the model's last load), ``gpu_share_pct``
  (the runtime's self-report, where it gives one).
- medians of valid samples, gated samples left out: ``decode.<class>``,
  ``prefill.<class>``, ``ttft_ms.<class>``; reasoning-on cells with
  ``.reasoning`` appended (``decode.short.reasoning``). decode and prefill are
  tok/s.
- probe summaries: ``probe.<name>`` (a verdict), ``probe.<name>.passed`` and
  ``probe.<name>.total`` (task counts).
- ``load.max_streams_at_slo`` (the most concurrent streams of a ``[load]`` step
  meeting ``[load.slo]``; 0 when none does) and ``load.knee_streams`` (where
  aggregate throughput stops rising); ``load.max_rate_at_slo`` and
  ``load.knee_rate`` the same over ``[load] rates`` (offered requests/s).
- ``quality.kld_mean``, ``quality.kld_p99``, ``quality.same_top`` (percent of positions whose top
  token is the base's) and ``quality.ppl_ratio``: the model measured by ``[quality]`` against its
  ladder's base (``daemon/quality``); the base itself has none (it is the reference).
- ``pinned``; and any of the above prefixed ``incumbent.`` for the pinned
  model's value (``decode.short >= 0.8 * incumbent.decode.short``).
- a ``[variants]`` variant's figures, prefixed ``variant.<name>.``: the model's
  own variant of that name (``variant.kv8.decode.short >= decode.short``;
  load facts, memory, medians -- a variant runs no probe and no load step).
"""

from __future__ import annotations

from cardproof.daemon.campaign.rules import lang

FACT_NUM = (
    "offloaded_layers", "total_layers", "ctx_size", "spec_draft_n_max", "draft_acceptance",
    "load_seconds", "card_mib", "gpu_share_pct", "n_threads", "n_threads_batch", "n_batch", "n_ubatch",
)
FACT_TEXT = ("kv_cache_type_k", "kv_cache_type_v", "spec_type", "draft_model", "flash_attn")
BUFFERS = (
    "model_buffer_mib", "kv_buffer_mib", "compute_buffer_mib", "output_buffer_mib", "rs_buffer_mib",
    "draft_context_mib", "projector_mib",
)
MEDIANS = ("decode", "prefill", "ttft_ms")
LOAD_AXES = ("load.max_streams_at_slo", "load.knee_streams",  # from [load] steps (daemon/campaign/slo.py)
             "load.max_rate_at_slo", "load.knee_rate")
PROBE_COUNTS = ("passed", "total")
QUALITY = ("quality.kld_mean", "quality.kld_p99", "quality.same_top", "quality.ppl_ratio")  # daemon/quality


def type_of(name: str, *, probes: set[str] | frozenset[str], classes: set[str] | frozenset[str],
            variants: set[str] | frozenset[str] = frozenset(),
            variant_classes: set[str] | frozenset[str] | None = None) -> str | None:
    """num/str/bool/verdict for a name the run can supply, else None."""
    if name.startswith("incumbent."):
        name = name[len("incumbent."):]
    if name.startswith("variant."):
        _, variant, rest = (name.split(".", 2) + ["", ""])[:3]
        if variant not in variants or rest.split(".")[0] in ("probe", "load", "fit", "variant", "pinned"):
            return None
        return type_of(rest, probes=frozenset(), classes=classes if variant_classes is None else variant_classes)
    if name in QUALITY:
        return "num"
    if name in LOAD_AXES or name == "fit.max_context":  # the largest [fit] context that fits (daemon/run/load/fit.py)
        return "num"
    parts = name.split(".")
    head = parts[0]
    if len(parts) == 1:
        if head in FACT_NUM or head in BUFFERS:
            return "num"
        if head in FACT_TEXT:
            return "str"
        if head == "pinned":
            return "bool"
        return None
    if head in BUFFERS and len(parts) == 2:
        return "num"  # per device: kv_buffer_mib.CUDA0
    if head in MEDIANS and parts[1] in classes and (len(parts) == 2 or parts[2:] == ["reasoning"]):
        return "num"
    if head == "probe" and parts[1] in probes:
        if len(parts) == 2:
            return "verdict"
        if len(parts) == 3 and parts[2] in PROBE_COUNTS:
            return "num"
    return None


def known_names(probes, classes) -> list[str]:
    """The names a message can offer as "did you mean" material."""
    out = list(FACT_NUM) + list(FACT_TEXT) + list(BUFFERS) + ["pinned"] + list(LOAD_AXES) + list(QUALITY)
    out += [f"{m}.{c}" for m in MEDIANS for c in sorted(classes)]
    out += [f"probe.{p}" for p in sorted(probes)]
    return out


def validate(text: str, *, probes, classes, verdicts, variants=(), variant_classes=None) -> lang.Node:
    """Parse and type-check a rule for a campaign; raise lang.RuleError (one line).

    An unknown name is explained: a probe the campaign does not run, a prompt
    class it does not measure, a variant it does not name, or simply a name that does not exist.
    """
    tree = lang.parse(text)
    probes, classes, variants = frozenset(probes), frozenset(classes), frozenset(variants)
    vclasses = classes if variant_classes is None else frozenset(variant_classes)

    def typed(name: str) -> str | None:
        t = type_of(name, probes=probes, classes=classes, variants=variants, variant_classes=vclasses)
        if t is None:
            raise lang.RuleError(_unknown(name, probes, classes, variants), _pos(tree, name))
        return t

    result = lang.check(tree, typed, frozenset(verdicts))
    if result != "bool":
        raise lang.RuleError("a rule must come out true or false (it compares nothing)", 0)
    return tree


def _pos(tree: lang.Node, name: str) -> int | None:
    if tree.kind == "name" and tree.value == name:
        return tree.pos
    for item in tree.items:
        p = _pos(item, name)
        if p is not None:
            return p
    return None


def _unknown(name: str, probes, classes, variants=frozenset()) -> str:
    bare = name[len("incumbent."):] if name.startswith("incumbent.") else name
    parts = bare.split(".")
    if parts[0] == "variant" and len(parts) >= 2 and parts[1] not in variants:
        named = ", ".join(sorted(variants)) or "none"
        return f"unknown name {name!r}: the campaign names no variant {parts[1]!r} (its [variants]: {named})"
    if parts[0] == "variant" and len(parts) >= 3:
        return (f"unknown name {name!r}: a variant has load facts, memory and medians of the classes it measures "
                f"(variant.{parts[1]}.decode.<class>, variant.{parts[1]}.card_mib, ...), no probes or load steps")
    if parts[0] == "probe" and len(parts) >= 2 and parts[1] not in probes:
        run = ", ".join(sorted(probes)) or "none"
        return f"unknown name {name!r}: probe {parts[1]!r} is not run by this campaign (its [probes] run: {run})"
    if parts[0] in MEDIANS and len(parts) >= 2 and parts[1] not in classes:
        return (f"unknown name {name!r}: prompt class {parts[1]!r} is not measured "
                f"(campaign.prompt_classes: {', '.join(sorted(classes))})")
    close = [k for k in known_names(probes, classes) if k.split(".")[0] == parts[0]]
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown name {name!r}{hint}"
