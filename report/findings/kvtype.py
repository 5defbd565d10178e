"""A smaller KV cache type: the memory a variant saves beside what it costs in speed.

A variant that only changes the KV cache's type (``--cache-type-k``/``--cache-type-v``) trades
memory against speed: q8_0 halves an F16 cache, and may slow decode or prefill. Where the variant's
log proved every argument and both loads' own buffer lines state their KV cache, the finding sets
the memory saved (the KV cache by the log, and the server process's peak or the card's reading,
measured) beside each class's decode and prefill against the model. A speed change is stated only
where the Variants section states it (the samples apart beyond their scatter); otherwise the
finding says the run shows no measurable cost.
"""

from __future__ import annotations

from cardproof.marks import N_

from .base import Fig, Finding, FindingRule, Line, Term
from .pick import cell_peaks, number

KV_FLAGS = {"--cache-type-k": "k", "-ctk": "k", "--cache-type-v": "v", "-ctv": "v"}

TITLE = N_("{variant}: a {types} KV cache holds {saved} less")
TEXT = N_("With its KV cache as {types}, {model} holds {kv_variant} of KV cache against {kv_base} ({saved} less, by "
          "each load's log); {held}. What it costs in speed: {speed}.")
HELD_PROCESS = N_("in the class {cls} its server process peaked at {variant_mib} against {base_mib}")
HELD_CARD = N_("on the cards {variant_mib} against {base_mib}")
HELD_NONE = N_("no reading of the memory held compares the two in one prompt class")
SPEED = N_("{cls}: decode {decode}, prefill {prefill}")
NO_COST = N_("no measurable difference in any class it measured")
# the Variants section's own words for a comparison that states no ratio (their German is in the catalogue)
_STATE_WORDS = {"same": N_("no measurable difference"), "unstable": N_("unstable")}
LINE = N_("{model}: KV cache {kv}")
CONDITION = N_("The variant's log showed every argument taking; the KV caches are each load's own buffer lines, the "
               "memory held is measured, and a speed ratio is given only where the samples are apart beyond their "
               "scatter.")
CAVEAT = N_("One context and one slot: the KV cache grows with both, and so does what its type saves. A process's peak "
            "also holds what its server kept from earlier requests (its prompt cache), so the two peaks differ by more "
            "than the KV cache. A quantised KV cache can change the answers; this finding measures memory and speed, "
            "not quality.")


def _types(args: list[str]) -> str | None:
    """``q8_0`` or ``q8_0/q4_0`` (K/V) where the arguments set a KV cache type, else None."""
    found = {}
    for flag, value in zip(args, args[1:]):
        if flag in KV_FLAGS:
            found[KV_FLAGS[flag]] = value
    if not found:
        return None
    k, v = found.get("k", "f16"), found.get("v", "f16")
    return k if k == v else f"{k}/{v}"


def _ratio(r: dict, link: str):
    state = r.get("state")
    if state == "measurable":
        return Fig(r["ratio"], "ratio", link=link)
    return Term(_STATE_WORDS.get(state, N_("not measured")))


def _held(mb: dict, mv: dict, pairs: list[tuple[str, int, int]], peaks: dict, load_id) -> tuple:
    """What the two loads held, like for like: the cards' readings of each load, else the server process's
    peak during the same prompt class (a load's own peak spans whatever else it served: steps, probes)."""
    link = f"fig-load-{load_id}" if load_id else None
    if number(mb.get("card_mib")) and number(mv.get("card_mib")):
        return (Line(HELD_CARD, {"variant_mib": Fig(mv["card_mib"], "mib", 0, link=link),
                                 "base_mib": Fig(mb["card_mib"], "mib", 0)}),)
    said = tuple(Line(HELD_PROCESS, {"cls": Term(cls), "variant_mib": Fig(peaks[vc], "mib", 0, link=f"cell-{vc}"),
                                     "base_mib": Fig(peaks[bc], "mib", 0, link=f"cell-{bc}")})
                 for cls, bc, vc in pairs if bc in peaks and vc in peaks)
    return said or Line(HELD_NONE)


def _finding(group: dict, v: dict, peaks: dict) -> Finding | None:
    types, mb, mv = _types(v.get("args") or []), group.get("base_memory") or {}, v.get("memory") or {}
    if not types or not v.get("states") or not number(mb.get("kv_mib")) or not number(mv.get("kv_mib")) \
            or not mb["kv_mib"] or mv["kv_mib"] >= mb["kv_mib"]:
        return None
    speed, pairs, costs = [], [], False
    for pc in group.get("classes") or []:
        e = next((x for x in pc.get("entries") or [] if x["variant"]["name"] == v["name"]), None)
        if e is None or e.get("cell") is None:
            continue
        link = f"cell-{e['cell']['id']}"
        costs |= "measurable" in (e["decode"].get("state"), e["prefill"].get("state"))
        speed.append(Line(SPEED, {"cls": Term(pc["cls"]), "decode": _ratio(e["decode"], link),
                                  "prefill": _ratio(e["prefill"], link)}))
        if pc.get("base_cell"):
            pairs.append((pc["cls"], pc["base_cell"]["id"], e["cell"]["id"]))
    if not speed:
        return None
    params = {"variant": v["name"], "model": group["base"], "types": types,
              "kv_variant": Fig(mv["kv_mib"], "mib", 0, link=f"line-{mv['kv_line']}" if mv.get("kv_line") else None),
              "kv_base": Fig(mb["kv_mib"], "mib", 0, link=f"line-{mb['kv_line']}" if mb.get("kv_line") else None),
              "saved": Fig(1 - mv["kv_mib"] / mb["kv_mib"], "pct", 0),
              "held": _held(mb, mv, pairs, peaks, v.get("load_id")),
              "speed": tuple(speed) if costs else Term(NO_COST)}
    variant_name = f"{group['base']} · {v['name']}"
    lines = (Line(LINE, {"model": group["base"], "kv": params["kv_base"]}),
             Line(LINE, {"model": variant_name, "kv": params["kv_variant"]}))
    return Finding("kvtype", f"kvtype:{group['base']}:{v['name']}", TITLE, TEXT, params, lines, Line(CONDITION),
                   Line(CAVEAT))


def check(view: dict) -> list[Finding]:
    out, peaks = [], cell_peaks(view)
    for group in view.get("variants") or []:
        for v in group.get("variants") or []:
            f = _finding(group, v, peaks)
            if f is not None:
                out.append(f)
    return out


RULE = FindingRule("kvtype", check, order=76)
