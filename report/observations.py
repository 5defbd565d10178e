"""Stored observations said in the page's language: a message id and its values, formatted per locale.

The capture side stores what a gate observed and why a canary settled as
it did as JSON beside the English (``daemon/store/said.py``). Here the message id
is looked up in the catalogue, its numbers are formatted by Babel for the
page's language (0.05 / 0,05), texts among its values are shown verbatim as
quoted evidence, and nested messages are said the same way.

Whatever cannot be said so is shown as the stored English, quoted: a row
from before structured observations (prose only), an unknown message id (a
merged database from a newer or foreign cardproof), a value that does not
fit its field, damaged JSON. Nothing here raises on stored data.

In short, ``observations.py``: says a stored ``Said`` (``daemon/store/said.py``: an
English msgid of the catalogue plus its values, kept as ``*_json`` beside the English) in the page's
language with Babel numbers; a row with prose only (older databases) is shown quoted as stored
"""

from __future__ import annotations

import json
import math
import re
import string

import jinja2
from babel.numbers import format_decimal

from cardproof.daemon.store.crashes import from_end_reason

from cardproof.marks import N_
from .i18n import CATALOGUE, Lang
from .mdsafe import MD, code_span, esc

#: how deep messages may nest inside each other's values (a hostile row could nest without end)
_MAX_DEPTH = 6
#: the capture side's message id of a quoted text (``daemon.said.QUOTED``)
_QUOTED = "{text}"


class _Unsayable(Exception):
    """The stored message cannot be said from the catalogue; the stored English is shown instead."""


def quoted(text) -> MD:
    """Stored English prose on any page: marked as a quotation (``<q>``), escaped."""
    if text is None or str(text).strip() == "":
        return MD("—")
    return MD("<q>") + esc(text) + MD("</q>")


def say(L: Lang, stored_json, text=None) -> MD:
    """The observation ``stored_json`` (the JSON column) in ``L``'s language; ``text`` (the English
    column) quoted where there is no structured form or it cannot be said."""
    if stored_json:
        try:
            return _say(L, json.loads(stored_json), 0)
        except (_Unsayable, ValueError, TypeError, RecursionError):
            pass
    return quoted(text)


@jinja2.pass_context
def template_say(ctx, stored_json, text=None) -> MD:
    """``said(row.observed_json, row.observed_text)`` in templates, in the page's language (``L``)."""
    return say(ctx["L"], stored_json, text)


def _say(L: Lang, data, depth: int) -> MD:
    if depth > _MAX_DEPTH:
        raise _Unsayable("nested too deep")
    if isinstance(data, list):
        if not data:
            raise _Unsayable("empty list")
        return MD("; ").join(_say(L, d, depth + 1) for d in data)
    if not isinstance(data, dict) or not isinstance(data.get("msgid"), str):
        raise _Unsayable("not a message")
    msgid, params = data["msgid"], data.get("params") or {}
    if not isinstance(params, dict):
        raise _Unsayable("params not an object")
    if msgid == _QUOTED:
        return quoted(params.get("text"))
    if msgid not in CATALOGUE:
        raise _Unsayable(f"unknown message id {msgid[:60]!r}")
    out = MD("")
    try:
        parts = list(string.Formatter().parse(L.gettext(msgid)))
    except ValueError as exc:  # a broken template in a translation: the English instead
        raise _Unsayable(str(exc)) from exc
    for literal, name, spec, _conv in parts:
        out += MD(literal)  # catalogue text: ours, trusted
        if name is not None:
            if name not in params:
                raise _Unsayable(f"no value for {{{name}}}")
            out += _value(L, params[name], spec or "", depth)
    return out


def _value(L: Lang, value, spec: str, depth: int) -> MD:
    if isinstance(value, (dict, list)):
        return _say(L, value, depth + 1)
    if value is None:
        return MD("—")
    if isinstance(value, bool):
        return code_span(str(value).lower())
    if isinstance(value, (int, float)):
        return esc(_number(L, value, spec))
    # text among the values is evidence (a driver's reason, an address, an error): verbatim
    return code_span(str(value))


def _number(L: Lang, value, spec: str) -> str:
    """``value`` in the page's locale, following the English template's format (``.2f``, ``.0%``)."""
    digits = None
    if spec.startswith(".") and spec[1:-1].isdigit():
        digits = int(spec[1:-1])
    if spec.endswith("%"):
        return L.pct(value, digits or 0)
    if digits is not None:
        return L.num(value, digits)
    if not math.isfinite(value):
        return L.num(value)  # a dash: no figure to print
    if isinstance(value, int) or float(value).is_integer():
        return L.num(value, 0)
    return format_decimal(value, locale=L.code)  # up to three decimals, none trailing


# How a load ended: the closed vocabulary the capture side writes into loads.end_reason
# (daemon/run/runner.py, daemon/logs/processes.py, daemon/logs/attribution.py). Each is a message of the
# catalogue, said in the page's language; anything else (an older or merged database) is quoted.
_END_FIXED = frozenset({N_("next model"), N_("run ended"), N_("next process started"), N_("model failed to load"),
                        N_("process exit"), N_("exit after the model failed to load")})
_END_PATTERNS = ((re.compile(r"exited with status (-?\d{1,6})"), N_("exited with status {status}"), "status", int),
                 # a router's child: the router turns any signal into status 1 (daemon/store/crashes.py)
                 (re.compile(r"crashed: exited unasked with status (-?\d{1,6})"),
                  N_("crashed: exited unasked with status {status} (the router reports any signal as status 1: "
                     "which one is not known)"), "status", int),
                 (re.compile(r"crashed: (\S.{0,80})"), N_("crashed: {signal}"), "signal", str))
#: a crash by a known signal is said with what that signal usually means (daemon/store/crashes.py's table)
CRASHED_BY = N_("crashed: {signal} ({meaning})")


def end_reason(L: Lang, text) -> MD:
    """``loads.end_reason`` in ``L``'s language (a signal name or exit status as a value)."""
    if text is None or str(text).strip() == "":
        return MD("—")
    text = str(text)
    if text in _END_FIXED:
        return say(L, json.dumps({"msgid": text, "params": {}}), text)
    sig = from_end_reason(text)
    if sig is not None:
        return say(L, json.dumps({"msgid": CRASHED_BY, "params": {
            "signal": sig.key, "meaning": {"msgid": sig.meaning, "params": {}}}}), text)
    for pattern, msgid, name, kind in _END_PATTERNS:
        m = pattern.fullmatch(text)
        if m:
            return say(L, json.dumps({"msgid": msgid, "params": {name: kind(m[1])}}), text)
    return quoted(text)


@jinja2.pass_context
def template_end_reason(ctx, text) -> MD:
    """``end_reason(ld.end_reason)`` in templates, in the page's language."""
    return end_reason(ctx["L"], text)
