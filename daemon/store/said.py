"""Sentences the capture side stores for the pages: a message id and its values, never prose only.

A gate's observation or a canary's reason is built as :class:`Said` (an
English template of the report's catalogue and its values) and stored twice:
as English text (``observed_text``, ``canaries.reason``: for the CLI and for
readers of older versions) and as JSON (``observed_json``, ``reason_json``),
which the report renders in each page's language with its number format
(``report/observations.py``). Nothing here imports from the rest of cardproof,
so any capture module may use it.

In short, ``said.py``: anything the capture side says to readers (gate observations,
canary reasons) as a message id plus values, so the report can say it in either language
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True)
class Said:
    """An observation as a message template and its values, so each page can say it in its language.

    ``msgid`` is an English template with ``{name}`` fields, optionally with a
    number format (``{seconds:.2f}``, ``{share:.0%}``); it is a message id of the
    report's catalogue. ``params`` hold the values: a number (formatted per
    locale on the page), a text (evidence: shown verbatim, as quoted), ``None``
    (shown as a dash), another ``Said``, or a list of them (joined with "; ").
    The store keeps both: :meth:`english` as ``observed_text`` (for the CLI and
    old readers) and :meth:`to_json` as ``observed_json`` (what pages render).
    """

    msgid: str
    params: dict = field(default_factory=dict)

    def english(self) -> str:
        out = []
        for literal, name, spec, _conv in string.Formatter().parse(self.msgid):
            out.append(literal)
            if name is not None:
                out.append(_english_value(self.params.get(name), spec or ""))
        return "".join(out)

    def to_json(self) -> dict:
        return {"msgid": self.msgid, "params": {k: _json_value(v) for k, v in self.params.items()}}

    @classmethod
    def quoted(cls, text: str) -> "Said":
        """Prose from elsewhere (an error, an older row) inside a composed sentence: shown as quoted."""
        return cls(QUOTED, {"text": text})

    @classmethod
    def from_json(cls, data) -> "Saying | None":
        """A stored saying back as objects; None for anything that is not one (a damaged row)."""
        if isinstance(data, list):
            items = [cls.from_json(d) for d in data]
            return items if items and all(isinstance(i, Said) for i in items) else None
        if not (isinstance(data, dict) and isinstance(data.get("msgid"), str)
                and isinstance(data.get("params", {}), dict)):
            return None
        params = {}
        for k, v in data.get("params", {}).items():
            if isinstance(v, (dict, list)):
                v = cls.from_json(v)
                if v is None:
                    return None
            params[str(k)] = v
        return cls(data["msgid"], params)


#: the message id of a quoted text: the text alone, shown as evidence
QUOTED = "{text}"


#: what a gate or canary may say: plain English (an extension's, stored as prose only), a
#: :class:`Said`, or several of them (joined with "; ")
Saying = Union[str, Said, list]


def english(said: "Saying | None") -> str | None:
    """The English text of a saying (what ``observed_text`` and ``canaries.reason`` store)."""
    if said is None or isinstance(said, str):
        return said
    return _english_value(said, "")


def said_json(said: "Saying | None") -> dict | list | None:
    """The structured form stored beside the English; None for plain prose (rendered quoted)."""
    if isinstance(said, Said):
        return said.to_json()
    if isinstance(said, list) and said:
        return [(s if isinstance(s, Said) else Said.quoted(str(s))).to_json() for s in said]
    return None


def _english_value(value, spec: str) -> str:
    if isinstance(value, Said):
        return value.english()
    if isinstance(value, list):
        return "; ".join(_english_value(v, "") for v in value)
    if value is None:
        return "—"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and spec and math.isfinite(value):
        try:
            return format(value, spec)
        except ValueError:
            return str(value)
    return str(value)


def _json_value(value):
    if isinstance(value, Said):
        return value.to_json()
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf/nan: shown as the text it is
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)
