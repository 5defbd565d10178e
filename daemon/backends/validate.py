"""Typed readers for what a server answers: the one place a response is checked.

Every value a backend takes from a server's JSON and passes on to the store
goes through these readers. A value of the wrong kind is not guessed at: it
becomes ``BackendError("protocol", "<field> is not a number: '<value>'")``,
so the runner stores an exception sample that names the field and what the
server sent, and nothing but a finite number in range ever reaches a numeric
column. ``bool`` is not a number (JSON ``true`` is not 1 token). ``null``
where a counter is optional reads as None; where it is required it is an
error, like a missing key.
"""

from __future__ import annotations

import json
import math

from .base import BackendError

#: Upper bound for any counter or duration. Far beyond anything a real server
#: reports (1e15 ms is 31,000 years; Ollama's nanosecond durations get their
#: own, larger bound) and far inside what SQLite and the report can hold.
MAX_VALUE = 1e15
MAX_NS = 1e18
_SHOW_CHARS = 80


def show(value) -> str:
    """A short, safe rendering of a foreign value for an error text.

    Strings keep Python's quoting (``'<b>x</b>'``); a huge integer is named by
    its size, not printed (str() of one with >4300 digits raises).
    """
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, str):
        cut = value[:_SHOW_CHARS]
        return repr(cut) + ("…" if len(value) > _SHOW_CHARS else "")
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except ValueError:  # a nested huge integer
        text = f"a {type(value).__name__}"
    return text[:_SHOW_CHARS] + ("…" if len(text) > _SHOW_CHARS else "")


def malformed(where: str, what: str, value) -> BackendError:
    """The protocol error for one field: ``<where> is <what>: <value>``."""
    return BackendError("protocol", f"{where} is {what}: {show(value)}", where=where,
                        detail={"value": show(value), "reason": what})


def missing(where: str) -> BackendError:
    """The protocol error for a required field the answer lacks."""
    return BackendError("protocol", f"{where} is missing", where=where, detail={"reason": "missing"})


def as_number(value, where: str, *, required: bool = False, integer: bool = False,
              low: float = 0.0, high: float = MAX_VALUE):
    """``value`` as int (``integer``) or float, checked finite and in ``[low, high]``; None for null."""
    if value is None:
        if required:
            raise missing(where)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise malformed(where, "not a number", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise malformed(where, "not a finite number", value)
    if not low <= value <= high:
        # compare before any conversion: float(10**400) itself raises
        raise malformed(where, "out of range", value)
    if integer:
        if isinstance(value, float):
            if not value.is_integer():
                raise malformed(where, "not a whole number", value)
            return int(value)
        return value
    return float(value)


def as_count(value, where: str, *, required: bool = False):
    """A token or character count: a whole number from 0 up."""
    return as_number(value, where, required=required, integer=True)


def as_text(value, where: str, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise missing(where)
        return None
    if not isinstance(value, str):
        raise malformed(where, "not text", value)
    return value


def as_object(value, where: str, *, required: bool = False) -> dict | None:
    if value is None:
        if required:
            raise missing(where)
        return None
    if not isinstance(value, dict):
        raise malformed(where, "not an object", value)
    return value


def as_list(value, where: str, *, required: bool = False) -> list | None:
    if value is None:
        if required:
            raise missing(where)
        return None
    if not isinstance(value, list):
        raise malformed(where, "not a list", value)
    return value


_ABSENT = object()


def _walk(root: dict, path: str):
    """The value at a dotted ``path`` under ``root`` (``_ABSENT`` if a key is missing); intermediate objects are checked."""
    parts = path.split(".")
    node = root
    for i, key in enumerate(parts[:-1]):
        node = as_object(node.get(key), ".".join(parts[: i + 1]))
        if node is None:
            return _ABSENT
    return node.get(parts[-1], _ABSENT)


def _read(reader, what: str, root: dict, path: str, required: bool, **kw):
    value = _walk(root, path)
    if value is _ABSENT:
        if required:
            raise missing(path)
        return None
    if value is None and required:
        raise malformed(path, what, None)  # "timings.predicted_n is not a number: null"
    return reader(value, path, **kw)


def number(root: dict, path: str, *, required: bool = False, **kw):
    """``as_number`` of the value at ``path`` (``"timings.predicted_per_second"``), named by it."""
    return _read(as_number, "not a number", root, path, required, **kw)


def count(root: dict, path: str, *, required: bool = False):
    return _read(as_count, "not a number", root, path, required)


def text(root: dict, path: str, *, required: bool = False) -> str | None:
    return _read(as_text, "not text", root, path, required)


def obj(root: dict, path: str, *, required: bool = False) -> dict | None:
    return _read(as_object, "not an object", root, path, required)


def model_list(data, where: str, *, key: str = "data", id_keys: tuple[str, ...] = ("id",),
               set_id: bool = True) -> list[dict]:
    """The entries of a model listing (``{"data": [...]}``) that a caller can use.

    The answer must be an object holding a list; an entry that is not an
    object, or names no model as text, is left out (it cannot be a model a
    campaign names). Each kept entry has its name under ``id`` (unless not
    ``set_id``), and the
    parts the runner reads (``path``, ``aliases``, ``status``) of the right
    kind or not at all.
    """
    body = as_object(data, where, required=True)
    entries = as_list(body.get(key), f"{where}: {key}") or []
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = next((entry[k] for k in id_keys if isinstance(entry.get(k), str) and entry[k]), None)
        if name is None:
            continue
        out.append(_clean_entry(dict(entry, id=name) if set_id else dict(entry)))
    return out


def _clean_entry(entry: dict) -> dict:
    """A router's model entry with the parts the runner reads (path, aliases, status args) of the right kind.

    What has the wrong kind is dropped, not guessed: an entry is the
    server's description of a model, and a run does not stop over it.
    """
    out = entry
    if "path" in out and not isinstance(out["path"], str):
        del out["path"]
    if "aliases" in out:
        aliases = out["aliases"]
        out["aliases"] = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list) else []
    status = out.get("status")
    if isinstance(status, dict) and "args" in status:
        args = status["args"]
        out["status"] = dict(status, args=[a for a in args if isinstance(a, str)] if isinstance(args, list) else [])
    elif status is not None and not isinstance(status, (dict, str)):
        del out["status"]
    return out


#: numeric SampleResult fields and whether each is a count (whole number)
SAMPLE_NUMBERS = {
    "prompt_tokens": True, "generated_tokens": True, "prompt_ms": False, "predicted_ms": False,
    "prefill_tps": False, "decode_tps": False, "ttft_ms": False, "wall_ms": False, "answer_chars": True,
    "reasoning_chars": True, "draft_tokens": True, "draft_accepted": True, "cached_tokens": True,
}


def check_sample(result) -> None:
    """Last check before a sample is stored: every numeric field None or a finite number in range.

    The backends validate what they read; this also covers what they derive
    (a wall-clock rate from a tiny interval) and any backend to come.
    """
    for name, whole in SAMPLE_NUMBERS.items():
        as_number(getattr(result, name), name, integer=whole)
    for name in ("stop_reason", "counter_source"):
        as_text(getattr(result, name), name)
