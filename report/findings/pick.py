"""What several finding rules pick from a run view the same way: a model's cell, its shape, its memory."""

from __future__ import annotations

import math

from .stable import spread_ratio


def number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def cell_of(model: dict, cls: str) -> dict | None:
    """The model's cell of ``cls`` as the headline reads it: reasoning off where measured."""
    return model["cells"].get((cls, False)) or model["cells"].get((cls, True))


def stable_cell(model: dict, cls: str) -> dict | None:
    """That cell where a finding may read its decode: answered, and not unstable."""
    c = cell_of(model, cls)
    return c if c and c.get("decode") and not c.get("unstable") else None


def first_class(view: dict) -> str | None:
    """The class the headline states first: the one a finding compares models in."""
    return view["classes"][0] if view.get("classes") else None


def spread_unstable(spread, view: dict) -> bool:
    """The campaign's max/min limit applied to any spread (a prefill, a depth step), as to a cell's decode."""
    r = spread_ratio(spread)
    return r is not None and r > view.get("unstable_ratio", float("inf"))


def shape(view: dict, model: str) -> dict:
    return (view.get("shapes") or {}).get(model) or {}


def is_moe(s: dict) -> bool | None:
    """True for a mixture of experts, False for a dense model, None where the header was not read."""
    count, used = s.get("expert_count"), s.get("expert_used_count")
    if not isinstance(count, int) or not number(s.get("params")):
        return None
    return count > 0 and isinstance(used, int) and used > 0


def bits_per_weight(s: dict) -> float | None:
    """The file's mean bits per weight: its size over its parameters (the header's few KiB included)."""
    if number(s.get("file_bytes")) and number(s.get("params")) and s["params"] > 0:
        return s["file_bytes"] * 8 / s["params"]
    return None


def card_rows(view: dict) -> dict[str, dict]:
    """model -> its first measured load's memory row where the card was read (NVML), else nothing."""
    memory = view.get("memory") or {}
    if memory.get("status") != "measured":
        return {}
    out: dict[str, dict] = {}
    for r in memory.get("loads", []):
        if number(r.get("card_mib")) and r.get("model") not in out:
            out[r["model"]] = r
    return out


def process_cells(load: dict) -> list[dict]:
    """A memory row's cells with the peak resident memory of its server process measured (MiB)."""
    return [c for c in load.get("process_cells") or [] if number(c.get("peak_rss_mib"))]


def cell_peaks(view: dict) -> dict:
    """cell id -> the peak resident memory of its server process during that cell (MiB), every load."""
    return {c["cell_id"]: c["peak_rss_mib"] for r in (view.get("memory") or {}).get("loads", [])
            for c in process_cells(r)}
