"""Whether a variant's arguments took: what its load's own log says, argument by argument.

The command line (or preset) says what was asked; only the load's lines say
what the server did with it: a build may ignore ``-fa on`` for a cache type
it cannot pair with it, cap ``-ub`` at ``-b``, or put no layer on a card
that is not there. Each argument is read against the fact its setting
states (``args.SETTINGS``):

* ``took`` -- the log states the asked value;
* ``contradicted`` -- the log states another value (a variant with one gets a
  caveat and no finding in the article);
* ``not shown`` -- the log states nothing either way (no card, so no
  offload line; a dense model, so no expert tensor to keep on the CPU);
* ``not checked`` -- an argument cardproof does not read; passed through.

A fact's first line id is kept, so the article links each verdict to it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ..logs.attribution import scope_facts
from ..logs.lines import clean
from ..logs.parsers import parse_line
from ..load.fit_evidence import _phase
from .args import Expectation, expectations

TOOK, CONTRADICTED, NOT_SHOWN, NOT_CHECKED = "took", "contradicted", "not shown", "not checked"
_HOST_BUFFER = re.compile(r"^(CPU|.*_Host)(_Mapped)?$")  # where -ot ...=CPU puts a tensor: plain or pinned host memory
_EXPERT_LAYER = re.compile(r"^blk\.(\d+)\.ffn_\w*_exps\b")


# why an argument is not shown or did not take: English message ids, German in the report's catalogue
NO_OFFLOAD = "the log names no layers offloaded to a card (a CPU-only build prints none)"
UBATCH_CAPPED = "n_ubatch is capped at n_batch: set -b as well"
NO_OVERRIDE = "the log names no overridden tensor (a dense model has no experts to keep on the CPU)"
NO_EXPERT = "the log names no expert tensor kept on the CPU"
NO_REGEX = "the pattern is no regular expression Python reads"
NOTES = (NO_OFFLOAD, UBATCH_CAPPED, NO_OVERRIDE, NO_EXPERT, NO_REGEX)


@dataclass
class Check:
    """One argument against the log."""

    flag: str
    value: str | None
    setting: str | None
    expected: str | None  # in the log's words
    observed: str | None
    status: str
    line_id: int | None = None
    note: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def read_facts(lines: list[tuple[int, str]]) -> dict[str, list[tuple[object, str | None, int]]]:
    """fact name -> [(value, device, line id)] in log order, the draft model's own facts left out."""
    out: dict[str, list] = {}
    in_draft = in_swa = False
    for line_id, raw in lines:
        text = clean(raw)[2]
        in_draft, in_swa = _phase(text, in_draft, in_swa)
        for f in scope_facts(parse_line(text), in_draft, in_swa):
            if f.name.startswith("draft_"):
                continue
            value = f.value_num if f.value_num is not None else f.value_text
            out.setdefault(f.name, []).append((value, f.device, line_id))
    return out


def _num(value) -> str | None:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None if value is None else str(value)


def _first(facts: dict, name: str):
    found = facts.get(name) or []
    return found[0] if found else None


def check_one(e: Expectation, facts: dict) -> Check:
    """One argument of the variant against the facts of its load's log."""
    s = e.setting
    if s is None:
        return Check(e.flag, e.value, None, None, None, NOT_CHECKED)
    base = dict(flag=e.flag, value=e.value, setting=s.name)
    if s.kind == "fa":
        said = facts.get("flash_attn") or []
        resolved = [x for x in said if x[0] != "auto"]
        # "auto" is resolved later in the log; the last word said is the one in effect
        last = resolved[-1] if resolved else (said[-1] if said else None)
        if last is None:
            return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN)
        ok = e.value == "auto" or last[0] == e.value
        return Check(**base, expected=e.value, observed=str(last[0]), status=TOOK if ok else CONTRADICTED,
                     line_id=last[2])
    if s.name == "gpu_layers":
        layers, total = _first(facts, "offloaded_layers"), _first(facts, "total_layers")
        if layers is None:
            return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN,
                         note=NO_OFFLOAD)
        asked = int(e.value or 0)
        want = min(asked, int(total[0])) if total is not None else asked
        got = int(layers[0])
        return Check(**base, expected=str(want), observed=f"{got}/{_num(total[0]) if total else '?'}",
                     status=TOOK if got == want else CONTRADICTED, line_id=layers[2])
    if s.name in ("n_cpu_moe", "override_tensor"):
        return _overrides(e, base, facts.get("tensor_override") or [])
    found = _first(facts, s.fact)
    if found is None and s.name == "ctx_size":
        found = _first(facts, "slot_ctx_size")
    if found is None:
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN)
    observed = _num(found[0])
    ok = observed == (str(int(e.value)) if s.kind == "int" and e.value and e.value.lstrip("-").isdigit()
                      else e.value)
    note = None
    if not ok and s.name == "ubatch" and (_first(facts, "n_batch") or (None,))[0] == found[0]:
        note = UBATCH_CAPPED
    return Check(**base, expected=e.value, observed=observed, status=TOOK if ok else CONTRADICTED,
                 line_id=found[2], note=note)


def _overrides(e: Expectation, base: dict, said: list) -> Check:
    """``-ot PATTERN=BUFT,...`` and ``--n-cpu-moe N``: the tensors the log says were put elsewhere."""
    if not said:
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN,
                     note=NO_OVERRIDE)
    if e.setting.name == "n_cpu_moe":
        layers = sorted({int(m[1]) for name, device, _ in said if (m := _EXPERT_LAYER.match(str(name)))
                         and _HOST_BUFFER.match(device or "")})
        first = next((line for name, _, line in said if _EXPERT_LAYER.match(str(name))), said[0][2])
        if not layers:
            return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN, line_id=first,
                         note=NO_EXPERT)
        n = int(e.value or 0)
        ok = layers == list(range(min(n, layers[-1] + 1))) and layers[-1] < n
        return Check(**base, expected=f"layers 0-{n - 1}", observed=f"layers {layers[0]}-{layers[-1]}",
                     status=TOOK if ok else CONTRADICTED, line_id=first)
    rules = []
    for part in (e.value or "").split(","):
        pattern, _, buft = part.rpartition("=")
        try:
            rules.append((re.compile(pattern), buft))
        except re.error:
            return Check(**base, expected=e.value, observed=None, status=NOT_CHECKED,
                         note=NO_REGEX)
    hits = [(name, device, line) for name, device, line in said
            if any(rx.search(str(name)) and (device == buft or (buft == "CPU" and _HOST_BUFFER.match(device or "")))
                   for rx, buft in rules)]
    if hits:
        return Check(**base, expected=e.value, observed=f"{len(hits)} tensors, {hits[0][0]} on {hits[0][1]}",
                     status=TOOK, line_id=hits[0][2])
    return Check(**base, expected=e.value, observed=f"{said[0][0]} on {said[0][1]}", status=CONTRADICTED,
                 line_id=said[0][2])


def check_variant(args: list[str] | tuple[str, ...], lines: list[tuple[int, str]]) -> tuple[str, list[Check]]:
    """(status, checks) of a variant's arguments against its load's lines.

    ``contradicted`` where any argument's fact says otherwise; ``took`` where
    every argument read is stated as asked; ``partly`` where some are not
    shown or not read; ``no_log`` without a single line.
    """
    if not lines:
        return "no_log", [Check(e.flag, e.value, e.setting.name if e.setting else None, e.value, None, NOT_SHOWN)
                          for e in expectations(args)]
    facts = read_facts(lines)
    checks = [check_one(e, facts) for e in expectations(args)]
    if any(c.status == CONTRADICTED for c in checks):
        return "contradicted", checks
    if all(c.status == TOOK for c in checks):
        return "took", checks
    return "partly", checks
