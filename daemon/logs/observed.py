"""Requests the server itself counted, read from its log: observed, not measured by cardproof.

llama-server prints its own counters when it finishes a task, in every
verbosity and in several shapes over the years:

* 2025 on, one block::

      slot print_timing: id  3 | task 0 |
      prompt eval time =      26.59 ms /    19 tokens (...)
             eval time =      64.75 ms /    12 tokens (...)
            total time =      91.34 ms /    31 tokens
      draft acceptance rate = 0.78824 (  402 accepted /   510 generated)

* one line per figure, each with ``slot print_timing: id N | task T |``
  (2024--2026; 2026 adds ``draft acceptance = R (A accepted / G generated)``);
* ``INFO [ print_timings] prompt eval time = ... | ... id_slot=0 id_task=2``
  and ``generation eval time = X ms / N runs`` (2024, ik_llama.cpp), and the
  same in the JSON log format.

Each finished task becomes one row of ``observed_requests``: prompt tokens
and milliseconds, generated tokens and milliseconds, draft acceptance where
printed, the line it ends on and the time. The load is the one that line is
attributed to (joined at read time, so a line bound to its load later, or a
log load merged into a run's load, carries its requests along). A task whose
generation counters never appear (a cancelled task, a log cut off) is no row.
"""

from __future__ import annotations

import re

from ..store import json_value

_HEADER = re.compile(r"print_timing: id +(\d+) \| task (\d+) \| *$")
_TASK = re.compile(r"\| task (\d{1,12}) \||id_task\"?[=:] ?(\d{1,12})\b")
_SLOT = re.compile(r"\bid +(\d{1,12}) \| task|id_slot\"?[=:] ?(\d{1,12})\b")
_PROMPT = re.compile(r"prompt eval time *= *([\d.]+) ms / *(\d+) tokens")
_GEN = re.compile(r"(?<!prompt )(?:generation )?eval time *= *([\d.]+) ms / *(\d+) (?:tokens|runs)")
_ACCEPT = re.compile(r"draft acceptance(?: rate)? = ([\d.]+) \( *(\d+) accepted / *(\d+) generated\)")
# the lines of one block follow its header directly (prompt, eval, total, acceptance)
_BLOCK_LINES = 6
# the importer's trigger scan passes these lines to feed() (parsers/markers.py names them)

COLUMNS = ("source_id", "run_id", "line_id", "first_line_id", "task", "slot", "prompt_tokens", "prompt_ms",
           "generated_tokens", "decode_ms", "draft_accepted", "draft_generated", "ts")


# a count or a duration beyond these is a damaged line, not a request (and would not fit an integer column)
_MAX_TOKENS = 10**12
_MAX_MS = 1e12


def _num(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:  # "1.2.3" fits the pattern and is no number
        return None
    return value if value <= _MAX_MS else None  # "999...9" (400 digits) is inf: no duration


def _count(text: str) -> int | None:
    value = int(text)
    return value if value <= _MAX_TOKENS else None


class RequestCounters:
    """Feed every line that mentions timings; finished requests collect in ``rows``.

    State that must survive between two imports of a growing log (a block
    whose header came in the last read) is in :meth:`state`.
    """

    def __init__(self, state: dict | None = None):
        s = state or {}
        self.block: dict | None = s.get("block")
        self.open: dict[str, dict] = dict(s.get("open", {}))
        self.rows: list[dict] = []
        self._last: dict[str, dict] = {}

    def feed(self, line_id: int, load: int | None, text: str, ts: str | None) -> None:
        h = _HEADER.search(text) if "print_timing" in text else None
        if h:
            self.block = {"load": load, "slot": int(h[1]), "task": int(h[2]), "line": line_id, "ts": ts}
            return
        task = slot = None
        m = _TASK.search(text)
        if m:
            task = int(m[1] or m[2])
            s = _SLOT.search(text)
            slot = int(s[1] or s[2]) if s else None
        elif self.block and self.block["load"] == load and line_id - self.block["line"] <= _BLOCK_LINES:
            task, slot, ts = self.block["task"], self.block["slot"], ts or self.block["ts"]
        key = f"{load}/{task}"
        p = _PROMPT.search(text)
        if p:
            ms, n = _num(p[1]), _count(p[2])
            if ms is not None and n is not None:
                self.open[key] = {"first_line_id": line_id, "task": task, "slot": slot, "prompt_ms": ms,
                                  "prompt_tokens": n, "ts": ts}
            return
        g = _GEN.search(text)
        if g:
            ms, n = _num(g[1]), _count(g[2])
            if ms is None or n is None:
                return
            row = self.open.pop(key, None) or {"first_line_id": line_id, "task": task, "slot": slot,
                                                "prompt_ms": None, "prompt_tokens": None, "ts": ts}
            row.update(line_id=line_id, decode_ms=ms, generated_tokens=n,
                       draft_accepted=None, draft_generated=None)
            if ts is not None:
                row["ts"] = ts
            self.rows.append(row)
            self._last[key] = row
            return
        a = _ACCEPT.search(text) if "acceptance" in text else None
        if a and key in self._last and _count(a[2]) is not None and _count(a[3]) is not None:
            row = self._last.pop(key)
            row["draft_accepted"], row["draft_generated"] = int(a[2]), int(a[3])
        if self.block and line_id - self.block["line"] > _BLOCK_LINES:
            self.block = None

    def state(self) -> dict:
        return {"block": self.block, "open": self.open}

    def store(self, conn, source_id: int, run_id: int | None) -> int:
        """Insert the finished requests; returns how many."""
        if not self.rows:
            return 0
        cols = ", ".join(COLUMNS)
        conn.executemany(
            f"insert into observed_requests ({cols}) values ({', '.join('?' * len(COLUMNS))})",
            [(source_id, run_id, r["line_id"], r["first_line_id"], r["task"], r["slot"], r["prompt_tokens"],
              r["prompt_ms"], r["generated_tokens"], r["decode_ms"], r["draft_accepted"], r["draft_generated"],
              r["ts"]) for r in self.rows])
        n = len(self.rows)
        self.rows = []
        self._last = {}
        return n


def tps(tokens: int | None, ms: float | None) -> float | None:
    """Tokens per second from a count and the server's milliseconds; None where either is missing or zero."""
    if tokens is None or not ms or ms <= 0:
        return None
    return tokens / ms * 1000.0


def spread(values: list[float]) -> dict | None:
    """``{"median", "min", "max", "n"}`` of the values, or None for none."""
    if not values:
        return None
    v = sorted(values)
    mid = len(v) // 2
    median = v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2
    return {"median": round(median, 2), "min": round(v[0], 2), "max": round(v[-1], 2), "n": len(v)}


_ROWS_SQL = """
select l.load_id, o.id, o.line_id, o.first_line_id, o.task, o.slot, o.prompt_tokens, o.prompt_ms,
       o.generated_tokens, o.decode_ms, o.draft_accepted, o.draft_generated, o.ts
from observed_requests o join log_lines l on l.id = o.line_id
where l.load_id in ({marks})
order by o.line_id
"""
_ROW_KEYS = ("id", "line_id", "first_line_id", "task", "slot", "prompt_tokens", "prompt_ms", "generated_tokens",
             "decode_ms", "draft_accepted", "draft_generated", "ts")


# the log prints milliseconds with two decimals; a sample keeps the server's float
_MS_TOLERANCE = 0.0051


def _sent_by_cardproof(conn, run_ids: list[int]) -> dict[tuple, list[float]]:
    """``(prompt tokens, generated tokens) -> [prompt ms, ...]`` of every request cardproof sent in these runs.

    Every kind of sample (measured, canary, load, rate and depth steps, a variant's), whatever load it
    names: a canary that evicts its model is served by the load its request started, not the one it
    was sent to. And every probe request, from the server's own ``timings`` in the stored exchange.
    """
    sent: dict[tuple, list[tuple]] = {}
    if not run_ids:
        return sent
    marks = ", ".join("?" * len(run_ids))
    for sid, p, g, ms in conn.execute(f"select id, prompt_tokens, generated_tokens, prompt_ms from samples "
                                      f"where run_id in ({marks}) and prompt_ms is not null", run_ids):
        sent.setdefault((p, g), []).append((ms, sid))
    has_probes = conn.execute("select 1 from sqlite_master where name = 'probe_results'").fetchone() is not None
    for (text,) in conn.execute(f"select exchange_json from probe_results where run_id in ({marks})",
                                run_ids) if has_probes else ():
        for timings in _probe_timings(text):
            for p in {timings.get("prompt_n"), timings.get("prompt_tokens")} - {None}:
                sent.setdefault((p, timings.get("predicted_n")), []).append((timings.get("prompt_ms"), None))
    return sent


#: tokens a second client's prompt may differ by from the canary's own: the same filler with another 16-character
#: nonce, which a tokenizer makes at most 16 tokens of (SmolLM2's came out 5 shorter, a tiny model's the same)
_SECOND_CLIENT_TOKENS = 16


def _second_clients(conn, run_ids: list[int]) -> dict[int, int]:
    """The foreign_load canary's samples (id -> prompt tokens) whose canary also sent a request as a second
    client: that request is cardproof's own too, and the server prints it right after the canary's sample."""
    if not run_ids or conn.execute("select 1 from sqlite_master where name = 'canaries'").fetchone() is None:
        return {}
    marks = ", ".join("?" * len(run_ids))
    return {sid: p for sid, p in conn.execute(
        f"select s.id, s.prompt_tokens from canaries c join samples s on s.id = c.sample_id "
        f"where c.run_id in ({marks}) and c.gate = 'foreign_load' and coalesce(c.result, '') != 'not_run'",
        run_ids) if isinstance(p, int)}


def _own_sample(row: dict, sent: dict[tuple, list[tuple]]) -> tuple[bool, int | None]:
    """Whether the server's counters of ``row`` are a request cardproof sent, and that sample's id."""
    if row["prompt_ms"] is None:
        return False, None
    for ms, sid in sent.get((row["prompt_tokens"], row["generated_tokens"]), []):
        if isinstance(ms, (int, float)) and abs(ms - row["prompt_ms"]) <= _MS_TOLERANCE:
            return True, sid
    return False, None


def _probe_timings(text: str | None) -> list[dict]:
    """The ``timings`` objects of a probe's stored answers (llama-server's own counters), however nested."""
    found, stack = [], [json_value(text)]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            t = item.get("timings")
            if isinstance(t, dict) and "prompt_ms" in t:
                found.append(t)
            stack.extend(v for k, v in item.items() if k != "timings")
        elif isinstance(item, list):
            stack.extend(item)
    return found


def observed_rows(conn, load_ids: list[int]) -> dict[int, list[dict]]:
    """The observed requests of each load, in log order (``{load_id: [row, ...]}``).

    ``own`` marks a request cardproof sent in the load's run (any sample, a probe): the same prompt and
    generated token counts and the same prompt milliseconds (matched by the server's counters, as
    requests.py does, never by time). Those are measured or judged already; only the rest is foreign.
    """
    out: dict[int, list[dict]] = {}
    if not load_ids:
        return out
    if conn.execute("select 1 from sqlite_master where name = 'observed_requests'").fetchone() is None:
        return out  # a store from before m011 opened read-only
    marks = ", ".join("?" * len(load_ids))
    run_ids = [r[0] for r in conn.execute(f"select distinct run_id from loads where id in ({marks}) "
                                          f"and run_id is not null", list(load_ids))]
    sent = _sent_by_cardproof(conn, run_ids)
    second = _second_clients(conn, run_ids)
    expect: int | None = None  # prompt tokens of the second client's request the next row may be
    for r in conn.execute(_ROWS_SQL.format(marks=marks), list(load_ids)):
        row = dict(zip(_ROW_KEYS, r[1:]))
        row["decode_tps"] = tps(row["generated_tokens"], row["decode_ms"])
        row["prefill_tps"] = tps(row["prompt_tokens"], row["prompt_ms"])
        row["own"], sid = _own_sample(row, sent)
        if not row["own"] and expect is not None and isinstance(row["prompt_tokens"], int) \
                and abs(row["prompt_tokens"] - expect) <= _SECOND_CLIENT_TOKENS:
            row["own"] = True
        expect = second.get(sid) if sid is not None else None
        out.setdefault(r[0], []).append(row)
    return out


def observed_summary(rows: list[dict]) -> dict:
    """Count and decode/prefill tok/s (median, min, max, n) of one load's observed requests.

    cardproof's own samples (``own`` rows) are left out and counted apart.
    """
    own = sum(1 for r in rows if r.get("own"))
    rows = [r for r in rows if not r.get("own")]
    accepted = [r for r in rows if r["draft_generated"]]
    drafted = sum(r["draft_generated"] for r in accepted)
    return {
        "count": len(rows),
        "own": own,
        "decode_tps": spread([r["decode_tps"] for r in rows if r["decode_tps"] is not None]),
        "prefill_tps": spread([r["prefill_tps"] for r in rows if r["prefill_tps"] is not None]),
        "draft_acceptance": (round(sum(r["draft_accepted"] for r in accepted) / drafted, 5) if accepted else None),
        # the counts behind the rate: tokens the draft proposed and the target kept, over these requests
        "draft_accepted": sum(r["draft_accepted"] for r in accepted) if accepted else None,
        "draft_generated": drafted if accepted else None,
        "line_ids": [r["line_id"] for r in rows],
    }
