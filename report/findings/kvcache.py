"""The KV cache against the weights: what a smaller quantisation saves in memory at the loaded context.

A quantisation shrinks the weights, not the KV cache, whose size the context decides. Where a load's
own buffer lines show a KV cache larger than its weights, the file sizes overstate what a smaller file
saves. The finding sets the memory measured for two models (the card's reading, else the server
process's peak resident memory as the OS counts it) against what their files suggest, for a pair of
one base model with the same KV cache; without such a pair, it names each model whose KV cache
outweighs its weights. Nothing comes from a file size or a self-report alone.
"""

from __future__ import annotations

from cardproof.marks import N_
from .base import Fig, Finding, FindingRule, Line, Term
from .pick import number, process_cells

TITLE = N_("{small} saves less memory than its file suggests")
TEXT = N_("{small} holds {saved} less memory than {big} ({small_mib} against {big_mib}, {where}), not the {file_saved} "
          "its file suggests: at a context of {ctx} tokens its KV cache ({kv}) is as large as {big}'s, and larger than "
          "its weights ({weights}).")
TITLE_ONE = N_("{model}'s KV cache outweighs its weights")
TEXT_ONE = N_("At a context of {ctx} tokens, {model}'s KV cache ({kv}) is larger than its weights ({weights}): the "
              "context, not the quantisation, decides most of its memory ({held}, {where}).")
LINE = N_("{model}: weights {weights}, KV cache {kv}, memory held {held}, file {file}")
CONDITION = N_("The weights and the KV cache are the server's own buffer lines of each load; the memory held is "
               "measured (the card's reading, else the server process's peak resident memory in the same prompt "
               "class as the OS counts it), never a file size.")
CAVEAT = N_("One context: at a shorter one the KV cache shrinks and the weights' share grows. A memory-mapped "
            "model's pages can be dropped under pressure, so the process's peak is what it held, not the least it "
            "needs; it also holds what the server kept from earlier requests (its prompt cache).")
ON_CARDS = N_("as the cards read it")
IN_PROCESS_CLASS = N_("in the server process, prompt class {cls}")
KV_SAME = 0.02  # the KV caches of a pair differ by at most this share: the same context and cache type
GAP = 0.10  # the file sizes overstate the saving by at least this many points before it is said


def _rows(view: dict) -> dict[str, dict]:
    """model -> its first measured load with the memory held, weights, KV cache and context all known.

    The memory held is the card's reading of the load, else its server process's peak during the first
    prompt class it measured with a reading: a load's own peak spans everything it served (load steps,
    probes, a growing prompt cache), which differs between models of one run."""
    out: dict[str, dict] = {}
    order = {c: i for i, c in enumerate(view.get("classes") or [])}
    for r in (view.get("memory") or {}).get("loads", []):
        b = r.get("log_buffers") or {}
        cells = sorted((c for c in process_cells(r) if c.get("prompt_class") in order and not c.get("reasoning")),
                       key=lambda c: order[c["prompt_class"]])
        if number(r.get("card_mib")):
            held, where, link, cls = r["card_mib"], Term(ON_CARDS), f"fig-load-{r['load_id']}", None
        elif cells:
            c = cells[0]
            held, cls, link = c["peak_rss_mib"], c["prompt_class"], f"cell-{c['cell_id']}"
            where = Line(IN_PROCESS_CLASS, {"cls": Term(cls)})
        else:
            continue
        if r.get("model") in out or not all(number(x) for x in (held, b.get("weights_mib"), b.get("kv_mib"),
                                                                 b.get("ctx_size"))):
            continue
        out[r["model"]] = {**b, "held": held, "where": where, "load_id": r["load_id"], "held_link": link,
                           "cls": cls}
    return out


def _mib(value, line_id=None, load_id=None) -> Fig:
    link = f"line-{line_id}" if line_id is not None else (f"fig-load-{load_id}" if load_id is not None else None)
    return Fig(value, "mib", digits=0, link=link)


def check(view: dict) -> list[Finding]:
    rows = _rows(view)
    files = {m: (view.get("shapes") or {}).get(m, {}).get("file_bytes") for m in rows}
    pin = next((m["name"] for m in view["models"] if m.get("pinned") and m["name"] in rows), None)
    found = []
    bigs = [pin] if pin else sorted(rows, key=lambda m: -(files.get(m) or 0))[:1]
    for big in bigs:
        b = rows[big]
        for small, s in rows.items():
            if small == big or not number(files.get(small)) or not number(files.get(big)) \
                    or files[small] >= files[big] or s["held"] >= b["held"] or s["cls"] != b["cls"]:
                continue
            if abs(s["kv_mib"] - b["kv_mib"]) > KV_SAME * b["kv_mib"] or s["kv_mib"] <= s["weights_mib"]:
                continue
            saved, file_saved = 1 - s["held"] / b["held"], 1 - files[small] / files[big]
            if file_saved - saved < GAP:
                continue
            lines = tuple(Line(LINE, {"model": m, "weights": _mib(r["weights_mib"], r["weights_line"]),
                                      "kv": _mib(r["kv_mib"], r["kv_line"]),
                                      "held": Fig(r["held"], "mib", digits=0, link=r["held_link"]),
                                      "file": Fig(files[m] / 2**20, "mib", digits=0)}) for m, r in ((small, s), (big, b)))
            params = {"small": small, "big": big, "saved": Fig(saved, "pct", digits=0),
                      "file_saved": Fig(file_saved, "pct", digits=0),
                      "small_mib": Fig(s["held"], "mib", digits=0, link=s["held_link"]),
                      "big_mib": Fig(b["held"], "mib", digits=0, link=b["held_link"]),
                      "where": s["where"], "ctx": Fig(s["ctx_size"], "int"),
                      "kv": _mib(s["kv_mib"], s["kv_line"]), "weights": _mib(s["weights_mib"], s["weights_line"])}
            found.append(Finding("kvcache", f"kvcache:{small}:{big}", TITLE, TEXT, params, lines, Line(CONDITION),
                                 Line(CAVEAT)))
    if found:
        return found
    for model, r in rows.items():
        if r["kv_mib"] > r["weights_mib"]:
            params = {"model": model, "ctx": Fig(r["ctx_size"], "int"), "kv": _mib(r["kv_mib"], r["kv_line"]),
                      "weights": _mib(r["weights_mib"], r["weights_line"]),
                      "held": Fig(r["held"], "mib", digits=0, link=r["held_link"]), "where": r["where"]}
            found.append(Finding("kvcache", f"kvcache:{model}", TITLE_ONE, TEXT_ONE, params, (), Line(CONDITION),
                                 Line(CAVEAT)))
    return found


RULE = FindingRule("kvcache", check, order=75)
