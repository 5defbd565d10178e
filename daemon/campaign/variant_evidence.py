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
* ``not checked`` -- an argument cardproof does not read (a campaign refuses
  every flag off ``args.SETTINGS``; a run stored before that may hold one).

A fact's first line id is kept, so the article links each verdict to it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from cardproof.marks import N_
from cardproof.daemon.logs.attribution import scope_facts
from cardproof.daemon.logs.lines import clean
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.logs.parsers.cmdline import parse_command_line
from cardproof.daemon.logs.fit_evidence import _phase
from cardproof.daemon.campaign.variant_args import Expectation, expectations

TOOK, CONTRADICTED, NOT_SHOWN, NOT_CHECKED = "took", "contradicted", "not shown", N_("not checked")
# where -ot ...=CPU and --n-cpu-moe put a tensor: plain, mapped, pinned (CUDA_Host) or repacked (CPU_REPACK,
# earlier CPU_AARCH64; AMX) host memory -- a CPU override may take any host buffer type (llama.cpp PR 14990)
_HOST_BUFFER = re.compile(r"^(CPU\w*|\w*_Host(_Mapped)?|AMX)$")
_EXPERT_LAYER = re.compile(r"^blk\.(\d+)\.ffn_\w*_exps\b")


# why an argument is not shown or did not take: English message ids, German in the report's catalogue
NO_OFFLOAD = N_("the log names no layers offloaded to a card (a CPU-only build prints none)")
UBATCH_CAPPED = N_("n_ubatch is capped at n_batch: set -b as well")
NO_OVERRIDE = N_("the log names no overridden tensor (a dense model has no experts to keep on the CPU)")
NO_EXPERT = N_("the log names no expert tensor kept on the CPU")
NO_REGEX = N_("the pattern is no regular expression Python reads")
CTX_PADDED = N_("llama.cpp rounds the context up to whole blocks of cache cells (32 or 256)")
NOTES = (NO_OFFLOAD, UBATCH_CAPPED, NO_OVERRIDE, NO_EXPERT, NO_REGEX, CTX_PADDED)

# what -fa asks for, in llama.cpp's words: a bare -fa (builds before 2025-08, a switch) is on; later builds
# take on/off/auto and the truthy spellings (common/arg.cpp is_truthy / is_falsey / is_autoy)
_FA_ASKED = {None: "on", "on": "on", "1": "on", "true": "on", "enabled": "on",
             "off": "off", "0": "off", "false": "off", "disabled": "off", "auto": "auto", "-1": "auto"}


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
        said = parse_line(text)
        if said:
            # a command line echoed into the log says what was asked, never what the load did
            asked = set(parse_command_line(text))
            said = [f for f in said if f not in asked]
        for f in scope_facts(said, in_draft, in_swa):
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


def _whole(value: str | None) -> int | None:
    try:
        return int(value or "")
    except ValueError:
        return None


def check_one(e: Expectation, facts: dict, rules: list | None = None, index: int = 0) -> Check:
    """One argument of the variant against the facts of its load's log.

    ``rules``: every ``-ot`` rule of the variant in order (:func:`ot_rules`;
    llama.cpp puts a tensor where the first pattern that matches it says),
    ``index`` this argument's place among the variant's; alone, its own rules.
    """
    s = e.setting
    if s is None:
        return Check(e.flag, e.value, None, None, None, NOT_CHECKED)
    base = dict(flag=e.flag, value=e.value, setting=s.name)
    if s.kind == "fa":
        asked = _FA_ASKED.get((e.value or "").lower() if e.value is not None else None)
        if asked is None:
            return Check(**base, expected=e.value, observed=None, status=NOT_CHECKED)
        said = facts.get("flash_attn") or []
        resolved = [x for x in said if x[0] != "auto"]
        # "auto" is resolved later in the log; the last word said is the one in effect
        last = resolved[-1] if resolved else (said[-1] if said else None)
        if last is None:
            return Check(**base, expected=asked, observed=None, status=NOT_SHOWN)
        ok = asked == "auto" or last[0] == asked
        return Check(**base, expected=asked, observed=str(last[0]), status=TOOK if ok else CONTRADICTED,
                     line_id=last[2])
    if s.name == "gpu_layers":
        return _gpu_layers(e, base, facts)
    if s.name in ("n_cpu_moe", "cpu_moe"):
        return _experts(e, base, facts.get("tensor_override") or [])
    if s.name == "override_tensor":
        if rules is None:
            rules, index = ot_rules([e]), 0
        if rules is None or not any(r[2] == index for r in rules):
            return Check(**base, expected=e.value, observed=None, status=NOT_CHECKED, note=NO_REGEX)
        return _overrides(e, base, facts.get("tensor_override") or [], rules, index)
    found = _first(facts, s.fact)
    if found is None and s.name == "ctx_size":
        found = _first(facts, "slot_ctx_size")
    if found is None:
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN)
    observed = _num(found[0])
    asked = _whole(e.value) if s.kind == "int" else None
    ok = observed == (str(asked) if asked is not None else e.value)
    note = None
    if s.name == "ctx_size" and asked is not None and not ok and isinstance(found[0], float):
        got = int(found[0])
        if asked == 0:  # -c 0: the model's own training context, whatever it is
            ok = True
        elif asked < got < asked + 256 and got % 32 == 0:  # padded up (builds before 2025-09)
            ok, note = True, CTX_PADDED
    if not ok and s.name == "ubatch" and (_first(facts, "n_batch") or (None,))[0] == found[0]:
        note = UBATCH_CAPPED
    return Check(**base, expected=e.value, observed=observed, status=TOOK if ok else CONTRADICTED,
                 line_id=found[2], note=note)


def _gpu_layers(e: Expectation, base: dict, facts: dict) -> Check:
    """``-ngl N``, and the words later builds take: ``auto`` (-1, the build decides) and ``all`` (-2)."""
    layers, total = _first(facts, "offloaded_layers"), _first(facts, "total_layers")
    word = (e.value or "").strip().lower()
    asked = _whole(word)
    if asked is None and word not in ("auto", "all"):
        return Check(**base, expected=e.value, observed=None, status=NOT_CHECKED)
    if layers is None:
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN, note=NO_OFFLOAD)
    got = int(layers[0])
    observed = f"{got}/{_num(total[0]) if total else '?'}"
    if word == "all" or asked == -2:
        want = int(total[0]) if total is not None else None
    elif word == "auto" or (asked is not None and asked < 0):  # no count asked: any count the build chose
        return Check(**base, expected=word, observed=observed, status=TOOK, line_id=layers[2])
    else:
        want = min(asked, int(total[0])) if total is not None else asked
    if want is None:
        return Check(**base, expected=e.value, observed=observed, status=NOT_SHOWN, line_id=layers[2])
    return Check(**base, expected=str(want), observed=observed, status=TOOK if got == want else CONTRADICTED,
                 line_id=layers[2])


def _is_host(device: str | None) -> bool:
    return bool(_HOST_BUFFER.match(device or ""))


def _experts(e: Expectation, base: dict, said: list) -> Check:
    """``--n-cpu-moe N`` (the experts of layers 0..N-1 on the CPU) and ``--cpu-moe`` (every layer's).

    Only layers with experts are named: DeepSeek's first three and GLM-4.5's
    first are dense, Llama 4 has experts in every other layer.
    """
    experts = [(int(m[1]), device, line) for name, device, line in said if (m := _EXPERT_LAYER.match(str(name)))]
    if not experts:
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN,
                     line_id=said[0][2] if said else None, note=NO_OVERRIDE if not said else NO_EXPERT)
    host = sorted({layer for layer, device, _ in experts if _is_host(device)})
    shown = f"layers {host[0]}-{host[-1]} on the CPU" if host else "no layer on the CPU"
    if e.setting.name == "cpu_moe":
        wrong = [x for x in experts if not _is_host(x[1])]
        expected = "every layer"
    else:
        n = _whole(e.value)
        if n is None:
            return Check(**base, expected=e.value, observed=None, status=NOT_CHECKED)
        expected = f"layers 0-{n - 1}"
        # an expert of the first N layers left on a card, or one past them kept on the CPU
        wrong = [x for x in experts if (x[0] < n) != _is_host(x[1])]
        if not wrong and not any(x[0] < n for x in experts):
            return Check(**base, expected=expected, observed=shown, status=NOT_SHOWN, line_id=experts[0][2],
                         note=NO_EXPERT)
    if wrong:
        return Check(**base, expected=expected, observed=f"{shown}; blk.{wrong[0][0]} on {wrong[0][1]}",
                     status=CONTRADICTED, line_id=wrong[0][2])
    return Check(**base, expected=expected, observed=shown, status=TOOK, line_id=experts[0][2])


def ot_rules(checks: list[Expectation]) -> list | None:
    """``[(regex, buffer type, expectation index)]`` of every ``-ot`` of the variant, in order; None: one is no regex."""
    rules = []
    for i, e in enumerate(checks):
        if e.setting is None or e.setting.name != "override_tensor":
            continue
        for part in (e.value or "").split(","):
            pattern, _, buft = part.rpartition("=")
            try:
                rules.append((re.compile(pattern), buft, i))
            except re.error:
                return None
    return rules


def _overrides(e: Expectation, base: dict, said: list, rules: list, index: int) -> Check:
    """``-ot PATTERN=BUFT,...``: the tensors the log says were put elsewhere.

    A tensor goes where the first pattern that matches it says, over all the
    variant's ``-ot`` in order: a tensor is this argument's when its first
    matching rule is one of this argument's.
    """
    if not said:
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN, note=NO_OVERRIDE)
    hits, wrong, others = [], [], False
    for name, device, line in said:
        first = next((r for r in rules if r[0].search(str(name))), None)
        if first is None:
            continue
        if first[2] != index:
            others = True
            continue
        buft = first[1]
        (hits if device == buft or (buft.upper() == "CPU" and _is_host(device)) else wrong).append(
            (name, device, line))
    if wrong:
        return Check(**base, expected=e.value, observed=f"{wrong[0][0]} on {wrong[0][1]}", status=CONTRADICTED,
                     line_id=wrong[0][2])
    if hits:
        return Check(**base, expected=e.value, observed=f"{len(hits)} tensors, {hits[0][0]} on {hits[0][1]}",
                     status=TOOK, line_id=hits[0][2])
    if others:  # the overrides named are another -ot's; none of this one's patterns matched a tensor
        return Check(**base, expected=e.value, observed=None, status=NOT_SHOWN)
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
    wanted = expectations(args)
    rules = ot_rules(wanted)
    # one -ot that is no regex leaves the order of all of them unknown: each -ot is then not checked
    checks = [check_one(e, facts, rules if rules is not None else [], i) for i, e in enumerate(wanted)]
    if any(c.status == CONTRADICTED for c in checks):
        return "contradicted", checks
    if all(c.status == TOOK for c in checks):
        return "took", checks
    return "partly", checks
