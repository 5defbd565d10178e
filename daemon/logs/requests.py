"""Per-request lines of llama-server: how many prompt tokens came from its cache, read from the log.

llama-server prints, for every task it serves::

    slot ...: id  0 | task 2 | new prompt, n_ctx_slot = 2048, n_keep = 0, task.n_tokens = 44
    slot print_timing: id  0 | task 2 | prompt eval time =     263.76 ms /     1 tokens (...)
    slot print_timing: id  0 | task 2 |        eval time =     109.55 ms /     3 tokens (...)

``task.n_tokens`` is the whole prompt, the prompt-eval count only what was
computed: the difference came from the prompt cache. A server that reports
no cache counter of its own -- Ollama running llama-server as its runner
passes ``timings.prompt_n`` / ``prompt_ms`` / ``predicted_n`` through as
``prompt_eval_count`` / ``prompt_eval_duration`` / ``eval_count``
(llm/llama_server.go) -- gets its cached tokens from these lines.

A sample is matched to a task by its own counters, never by time: the
prompt count, the generated count and the prompt time (printed to 0.01 ms)
must all agree, among the lines of the sample's own load, with exactly one
task. No match, or more than one, leaves the sample's cache unknown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..store import Store, dumps

_NEW = re.compile(r"\| task (\d+) \| new prompt, .*?task\.n_tokens = (\d+)")
_PROMPT = re.compile(r"\| task (\d+) \| prompt eval time = +([\d.]+) ms / +(\d+) tokens")
_EVAL = re.compile(r"\| task (\d+) \| +eval time = +([\d.]+) ms / +(\d+) tokens")
# the log prints milliseconds with two decimals; Ollama's nanoseconds are the same float truncated
_MS_TOLERANCE = 0.0051


@dataclass
class Task:
    task: int
    n_tokens: int | None = None
    prompt_ms: float | None = None
    prompt_n: int | None = None
    eval_n: int | None = None
    line_ids: list[int] = field(default_factory=list)

    @property
    def cached(self) -> int | None:
        if self.n_tokens is None or self.prompt_n is None:
            return None
        return self.n_tokens - self.prompt_n


_MAX_TOKENS = 10**12


def _ms(text: str) -> float | None:
    """A printed duration; ``1.2.3`` (the pattern allows it) is none."""
    try:
        return float(text)
    except ValueError:
        return None


def tasks_in(lines) -> list[Task]:
    """Tasks from ``(line_id, text)`` in log order; a task id seen again after its end starts a new task."""
    out: list[Task] = []
    open_: dict[int, Task] = {}
    for line_id, text in lines:
        if "| task " not in text:
            continue
        m = _NEW.search(text)
        if m:
            t = Task(int(m[1]), n_tokens=int(m[2]), line_ids=[line_id])
            open_[t.task] = t  # a restarted server counts tasks from 0 again
            out.append(t)
            continue
        m = _PROMPT.search(text)
        if m and int(m[1]) in open_ and _ms(m[2]) is not None:
            t = open_[int(m[1])]
            t.prompt_ms, t.prompt_n = _ms(m[2]), int(m[3])
            t.line_ids.append(line_id)
            continue
        m = _EVAL.search(text)
        if m and int(m[1]) in open_:
            t = open_[int(m[1])]
            t.eval_n = int(m[3])
            t.line_ids.append(line_id)
    return out


def match_task(tasks: list[Task], prompt_tokens: int | None, generated: int | None,
               prompt_ms: float | None) -> Task | None:
    """The one task whose printed counters are the sample's, or None."""
    if prompt_tokens is None or generated is None or prompt_ms is None:
        return None
    found = [t for t in tasks if t.prompt_n == prompt_tokens and t.eval_n == generated
             and t.prompt_ms is not None and abs(t.prompt_ms - prompt_ms) <= _MS_TOLERANCE
             and t.n_tokens is not None]
    return found[0] if len(found) == 1 else None


def load_tasks(db, load_id: int) -> list[Task]:
    rows = db.execute("select id, raw from log_lines where load_id = ? and raw like '%| task %' order by id",
                      [load_id]).fetchall()
    return tasks_in((lid, raw) for lid, raw in rows)


def cache_from_logs(store: Store, run_id: int) -> int:
    """Fill ``cached_tokens`` of the run's samples that have none, from their load's log lines.

    The evidence goes with the number: ``response_json.cache_from_log``
    names the task and its line ids. Returns how many samples were filled.
    """
    db = store.db
    rows = db.execute(
        "select id, load_id, prompt_tokens, generated_tokens, prompt_ms, response_json from samples "
        "where run_id = ? and cached_tokens is null and error_kind is null and load_id is not null", [run_id]
    ).fetchall()
    by_load: dict[int, list[Task]] = {}
    filled = 0
    with db.conn:
        for sid, load_id, prompt_tokens, generated, prompt_ms, response_json in rows:
            if load_id not in by_load:
                by_load[load_id] = load_tasks(db, load_id)
            task = match_task(by_load[load_id], prompt_tokens, generated, prompt_ms)
            if task is None or not 0 <= task.cached <= _MAX_TOKENS:
                continue  # a damaged line's count is no cache figure (and a huge one fits no column)
            response = json.loads(response_json) if response_json else {}
            response["cache_from_log"] = {"task": task.task, "prompt_tokens_total": task.n_tokens,
                                          "line_ids": task.line_ids}
            db.conn.execute("update samples set cached_tokens = ?, response_json = ? where id = ?",
                            [task.cached, dumps(response), sid])
            filled += 1
    return filled
