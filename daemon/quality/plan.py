"""Who is compared with whom: the campaign's models grouped into ladders, each with its base, or refused.

A pure function of the models' stored GGUF shapes (``models`` columns, m023),
so the grouping is tested without a server. Models are grouped as the
report's ladder finding groups them: by the header's base name (by
architecture and parameter count where a file names none). The base of a
ladder is its highest-precision member (most bits per weight: file bytes
over parameters). KL divergence compares two token distributions position
by position, which only means something over one vocabulary and one base
model: a member whose tokenizer, architecture or parameter count differs
from the base's is refused with the reason, never compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cardproof.daemon.store.said import Said



@dataclass
class Entry:
    """One model or variant to measure: ``name`` is what the store calls it (``model~variant`` for a variant)."""

    name: str
    model: str  # the campaign model whose file is read
    shape: dict
    variant: str | None = None
    args: tuple[str, ...] = ()


@dataclass
class Ladder:
    base: Entry
    members: list[Entry] = field(default_factory=list)  # other quantisations, most bits first
    variants: list[Entry] = field(default_factory=list)
    requantized_from: str | None = None  # the base's own source, where the campaign states one


@dataclass
class Plan:
    ladders: list[Ladder] = field(default_factory=list)
    refused: list[tuple[Entry, Said]] = field(default_factory=list)


def bits_per_weight(shape: dict) -> float | None:
    """File bits per parameter; None where either is unknown."""
    size, params = shape.get("file_bytes"), shape.get("params")
    if not isinstance(size, (int, float)) or not isinstance(params, (int, float)) or params <= 0:
        return None
    return size * 8 / params


def family(shape: dict) -> tuple:
    name = (shape.get("basename") or "").strip().lower()
    return ("name", name) if name else ("arch", shape.get("architecture"), shape.get("params"))


def _unplaceable(shape: dict) -> Said | None:
    if not shape.get("path"):
        return Said("no model file known: set file in the model's [[models]] table", {})
    if not shape.get("on_disk"):
        return Said("model file not on this machine: {path}", {"path": shape["path"]})
    if not all(shape.get(k) for k in ("tokenizer_sha256", "params", "file_bytes")):
        return Said("the file's GGUF header does not give its tokenizer, parameter count and size: the model "
                    "cannot be placed in a ladder, so nothing is compared with it", {})
    return None


def _differs(entry: Entry, base: Entry) -> Said | None:
    s, b = entry.shape, base.shape
    if s.get("tokenizer_sha256") != b.get("tokenizer_sha256"):
        return Said("its tokenizer ({tokenizer}) is not the base {base}'s ({base_tokenizer}): KL divergence "
                    "compares two token distributions over one vocabulary, so these models are never compared",
                    {"tokenizer": (s.get("tokenizer_sha256") or "?")[:12], "base": base.name,
                     "base_tokenizer": (b.get("tokenizer_sha256") or "?")[:12]})
    if s.get("architecture") != b.get("architecture"):
        return Said("its architecture is not the base {base}'s: another base model, so its KL divergence would "
                    "mix what the format changes with what the model changes", {"base": base.name})
    if s.get("params") != b.get("params"):
        return Said("its parameter count is not the base {base}'s: another base model, so its KL divergence "
                    "would mix what the format changes with what the model changes", {"base": base.name})
    return None


def plan(models: list[Entry], variants: list[Entry], requantized: dict[str, str]) -> Plan:
    """Ladders of ``models`` (campaign order kept within each), their ``variants``, and every refusal.

    ``requantized``: model -> the model the campaign says it was requantized from.
    """
    out = Plan()
    groups: dict[tuple, list[Entry]] = {}
    for m in models:
        why = _unplaceable(m.shape)
        if why is not None:
            out.refused.append((m, why))
        else:
            groups.setdefault(family(m.shape), []).append(m)
    by_model: dict[str, Ladder] = {}
    for members in groups.values():
        ranked = sorted(members, key=lambda e: (-(bits_per_weight(e.shape) or 0), e.name))
        ladder = Ladder(ranked[0], requantized_from=requantized.get(ranked[0].name))
        by_model[ladder.base.name] = ladder
        for m in ranked[1:]:
            why = _differs(m, ladder.base)
            if why is not None:
                out.refused.append((m, why))
            else:
                ladder.members.append(m)
                by_model[m.name] = ladder
        out.ladders.append(ladder)
    refused_models = {e.name: why for e, why in out.refused}
    for v in variants:
        if v.model in by_model:
            by_model[v.model].variants.append(v)
        else:
            why = refused_models.get(v.model)
            why = why or Said("no other member of its ladder and no variant to compare with its logits", {})
            out.refused.append((v, Said("its model {model} was refused: {reason}", {"model": v.model, "reason": why})))
    for ladder in list(out.ladders):
        if not ladder.members and not ladder.variants:
            out.ladders.remove(ladder)
            out.refused.append((ladder.base, Said("no other member of its ladder and no variant to compare "
                                                  "with its logits", {})))
    return out
