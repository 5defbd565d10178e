"""The trend pass's cache files as JSON (report/history/pages.py).

The cache files sit in the site's source folder, which a project may share or
copy; JSON is read as data whatever is in it, where a pickle runs code. What a
page file keeps is not plain JSON, so each value JSON has no form for is
written as a small object tagged ``"$t"``: a tuple, a dict whose keys are not
all strings (run ids, series keys), and the three value classes a point
carries (``stats.Spread``, ``steps.Step``, ``conditions.Difference``). Reading
gives back the same Python values; a file with a tag this code does not know
raises, and the caller reads it as no cache.
"""

from __future__ import annotations

import dataclasses
import json

from ..stats import Spread
from .conditions import Difference
from .steps import Step

_TAG = "$t"
_PLAIN = (str, int, float, bool, type(None))


def dumps(data) -> bytes:
    """``data`` as JSON bytes, its tuples, non-string keys and value classes tagged."""
    return json.dumps(_encode(data), ensure_ascii=False, separators=(",", ":")).encode()


def loads(raw: bytes):
    """The value ``dumps`` wrote; raises ``ValueError`` (or ``KeyError``/``TypeError``) on any other text."""
    return json.loads(raw, object_hook=_decode)


def _encode(o):
    t = type(o)
    if t in _PLAIN:
        return o
    if t is list:
        return [_encode(v) for v in o]
    if t is dict:
        if _TAG not in o and all(type(k) is str for k in o):
            return {k: _encode(v) for k, v in o.items()}
        return {_TAG: "map", "v": [[_encode(k), _encode(v)] for k, v in o.items()]}
    if t is Spread:
        return {_TAG: "spread", "v": [o.median, o.low, o.high, o.n]}
    if t is Difference:
        return {_TAG: "difference", "v": list(o)}
    if t is tuple:
        return {_TAG: "tuple", "v": [_encode(v) for v in o]}
    if t is Step:
        return {_TAG: "step", "v": dataclasses.asdict(o)}
    if isinstance(o, bool):
        return bool(o)
    if isinstance(o, int):  # a subclass (an enum, a numpy integer): its number
        return int(o)
    if isinstance(o, float):
        return float(o)
    raise TypeError(f"the trend cache has no JSON form for a {t.__qualname__}")


def _decode(d: dict):
    tag = d.get(_TAG)
    if tag is None:
        return d
    v = d["v"]
    if tag == "tuple":
        return tuple(v)
    if tag == "map":
        return {k: val for k, val in v}
    if tag == "spread":
        return Spread(*v)
    if tag == "difference":
        return Difference(*v)
    if tag == "step":
        return Step(**v)
    raise ValueError(f"unknown tag {tag!r} in a trend cache file")
