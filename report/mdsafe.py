"""Escaping by construction: foreign text reaches a page only as escaped Markdown.

Foreign text is everything that comes from a database (a merged one may hold
anything), a server or a log: model and campaign names, statuses, answers,
log lines, error texts. Trusted text is the templates, the message catalogue
and Markdown that Python builds from ids and numbers.

The rule is carried by a type: :class:`MD` marks trusted Markdown. Every
``{{ value }}`` of a template that is not ``MD`` is escaped on its way out
(the environment's ``finalize``), and every ``MD`` operation that mixes in a
plain string (``+``, ``%``, ``.format``, ``.join``) escapes that string with
the same escaper. So a forgotten filter shows backslashes, never markup.

Every foreign text is first made publishable (``report.privacy.public_text``):
credentials removed always, addresses masked unless the build was asked for
``show_addresses`` (:func:`publishing`).

In short, ``mdsafe.py``: escaping by construction: every printed value is escaped
for Markdown and HTML unless it is trusted ``MD``
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import html
import json
import re

import jinja2
import jinja2.runtime
from markupsafe import Markup

from cardproof.daemon.store.redact import redact_campaign_text

from .privacy import campaign_as_shown, public_text, source_name

#: Longest foreign text shown in one place; more is cut with a note (a 1 MB log line is evidence
#: in the database, not something a reader's browser has to lay out).
MAX_SHOWN_CHARS = 20_000

_SHOW_ADDRESSES: contextvars.ContextVar[bool] = contextvars.ContextVar("show_addresses", default=False)

# Line breaks and other white space would start new Markdown blocks: one space instead.
_SPACE = re.compile(r"[\t\n\v\f\r\x1c-\x1f\x85\u2028\u2029 ]+")
# Other control characters, lone surrogates (unwritable), bidi overrides (they reorder what a
# reader sees) and non-characters: shown as U+FFFD, like report.evidence does for log lines.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069\ufffe\uffff]")
# Characters that start Markdown or HTML syntax anywhere in a line: emphasis, code, links and
# images (brackets), attribute lists, headings, table cells, and HTML tags and entities.
# One translation table for both (a single pass in C: every value of every page goes through it).
_ESCAPES = str.maketrans({**{c: "\\" + c for c in "\\`*_{}[]#|"},
                          "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})
_WORD = re.compile(r"\w")
# Foreign text has no line breaks left, so only its first character can begin a line, and there
# a few more characters have meaning: list markers, "1." (ordered list), "!!!" (admonition),
# "???" (details), "===" (setext heading), "~~~" (fence).
# Each only as a marker: followed by white space, the end, or itself ("-5", "1.5" and "!" stay).
_LINE_START = re.compile(r"^(\s*)(?:(\d+)([.)])(?=\s|$)|([-+!])(?=\s|$|\4)|([=~?])(?=\s|$|\5))")


def _line_start(m: re.Match) -> str:
    if m.group(2):
        return f"{m.group(1)}{m.group(2)}\\{m.group(3)}"
    if m.group(4):
        return f"{m.group(1)}\\{m.group(4)}"
    return f"{m.group(1)}&#{ord(m.group(5))};"


class MD(Markup):
    """Trusted Markdown. Anything mixed into it that is not ``MD`` is escaped with :func:`esc`."""

    __slots__ = ()

    @classmethod
    def escape(cls, s) -> "MD":
        if isinstance(s, MD):
            return s
        if hasattr(s, "__html__"):
            # markupsafe.Markup from elsewhere is HTML-safe, not Markdown-safe: treat it as text
            return cls(_escape_text(str(s)))
        return cls(_escape_text(s))


@contextlib.contextmanager
def publishing(*, show_addresses: bool = False):
    """Everything rendered inside the block masks addresses unless ``show_addresses``."""
    token = _SHOW_ADDRESSES.set(bool(show_addresses))
    try:
        yield
    finally:
        _SHOW_ADDRESSES.reset(token)


def publishable(value) -> str:
    """``value`` as text that may be published: credentials removed, addresses masked (unless opted
    out), unprintable characters shown as U+FFFD, cut at :data:`MAX_SHOWN_CHARS`. No escaping."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = str(value)
    extra = len(text) - MAX_SHOWN_CHARS
    # masked before the cut, with a margin, so that the cut cannot leave half a secret unrecognised
    text = public_text(text[:MAX_SHOWN_CHARS + 1000] if extra > 0 else text, show_addresses=_SHOW_ADDRESSES.get()) or ""
    text = _UNPRINTABLE.sub("\ufffd", text)
    if extra > 0:
        text = text[:MAX_SHOWN_CHARS] + f" … [+{extra} characters not shown]"
    return text


#: escaped texts (and numbers) of this process, by (text, addresses shown): a run's evidence page prints
#: its thousands of log lines in every language, each masked and escaped once. Only short texts are kept
#: (a log line, a name): the memo holds its keys alive, and a hostile store's megabyte texts must not
#: pile up in it.
_ESCAPED: dict[tuple, str] = {}
_ESCAPED_MAX = 50_000
_ESCAPED_CHARS = 2_000


def _escape_text(value) -> str:
    kind = type(value)
    if (kind is str and len(value) <= _ESCAPED_CHARS) or kind is int or kind is float:
        # a number is kept by its type too: 1 and 1.0 are one key to a dict and two texts
        key = (value, _SHOW_ADDRESSES.get()) if kind is str else (kind, value, _SHOW_ADDRESSES.get())
        done = _ESCAPED.get(key)
        if done is None:
            if len(_ESCAPED) >= _ESCAPED_MAX:
                _ESCAPED.clear()
            done = _ESCAPED[key] = _escape_once(value)
        return done
    return _escape_once(value)


def _escape_once(value) -> str:
    text = _SPACE.sub(" ", publishable(value))
    # White space at either end keeps "**value**" from being bold; a template's own separators
    # (", ", " ") have no letter or digit and keep theirs.
    if _WORD.search(text):
        text = text.strip()
    return _LINE_START.sub(_line_start, text.translate(_ESCAPES), count=1)


def esc(value) -> MD:
    """Foreign text for any inline Markdown context (paragraph, table cell, heading, link text,
    admonition title): shown as the characters it is, on one line.

    Already trusted ``MD`` passes unchanged, so escaping twice is harmless.
    """
    if isinstance(value, MD):
        return value
    return MD.escape(value)


# "<" that an HTML parser would take for a tag, comment or declaration.
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")


def _inert_tags(text: str) -> str:
    """Code shown verbatim, with a zero-width word joiner after every ``<`` that opens markup.

    Markdown escapes code itself, but MkDocs reads the raw Markdown of a page
    with an HTML parser to find its anchors: an unclosed ``<!--`` or a
    ``<script>`` in a code span would hide every id after it and fail
    ``--strict``. The joiner is invisible and makes the ``<`` plain text.
    """
    return _TAG_OPEN.sub("<\u2060", text)


def code_span(value) -> MD:
    """Foreign text as a Markdown code span: shown verbatim, never as HTML.

    Markdown escapes ``<`` and ``&`` inside code spans itself, so the text is
    not HTML-escaped here (that would show ``&gt;``); markup is made inert
    (:func:`_inert_tags`); the fence is longer than any run of backticks in
    the text, so it cannot close early.
    """
    if isinstance(value, MD):
        value = str(value)
    text = _inert_tags(_SPACE.sub(" ", publishable(value)))
    if not text.strip():
        return MD("")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return MD(f"{fence}{pad}{text}{pad}{fence}")


def fenced(value, lang: str = "", indent: int = 0) -> MD:
    """Foreign multi-line text as a fenced code block indented by ``indent`` spaces.

    The fence is longer than any run of backticks in the text, so no line of
    it (a ```` ``` ```` in a campaign file) can close the block early; markup
    in it is made inert as in :func:`code_span`.
    """
    return _fence(publishable(value), lang, indent)


def _fence(text: str, lang: str, indent: int) -> MD:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _inert_tags(re.sub(r"[\v\f\x1c-\x1f\x85\u2028\u2029]", " ", text))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    pad = " " * indent
    body = "\n".join(pad + line if line.strip() else "" for line in text.split("\n"))
    return MD(f"{pad}{fence}{re.sub(r'[^A-Za-z0-9_+-]', '', lang)}\n{body}\n{pad}{fence}")


@jinja2.pass_context
def frozen_campaign(ctx, text) -> dict:
    """A frozen campaign text for a page, whole (never cut): ``block`` (a fenced TOML block indented for
    a details box), ``exact`` (shown byte for byte as stored and hashed), ``secret_lines`` and
    ``personal_lines`` (lines masked: credentials; addresses and user names). See ``privacy.campaign_as_shown``."""
    shown = campaign_as_shown(text, show_addresses=_SHOW_ADDRESSES.get())
    return shown | {"block": _fence(_UNPRINTABLE.sub("\ufffd", shown["text"]), "toml", 4)}


_ANCHOR_OK = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def anchor(value) -> MD:
    """A page anchor (``id``/``#...``) made from foreign text: ``[a-z0-9_-]`` only.

    Text that is already such a name is kept (links stay readable); anything
    else becomes a slug with a short hash, the same for the same text.
    """
    text = "" if value is None else str(value)
    if _ANCHOR_OK.fullmatch(text):
        return MD(text)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:8]
    return MD(f"{slug}-{digest}" if slug else f"x-{digest}")


def yaml_title(*parts) -> MD:
    """A page title for the front matter: one YAML double-quoted scalar of HTML-escaped text.

    MkDocs and Material print ``page.meta.title`` without escaping (``<title>``,
    header, navigation), so the text is HTML-escaped here; JSON quoting keeps
    a ``"`` or a line break from ending the scalar.
    """
    text = _SPACE.sub(" ", publishable(" ".join(str(p) for p in parts))).strip()
    return MD(json.dumps(html.escape(text, quote=True), ensure_ascii=False))


def join(items, sep: str = "") -> MD:
    """Jinja's ``join`` for Markdown: each item escaped unless it is ``MD``."""
    return MD(esc(sep)).join(esc(i) for i in items)


def finalize(value):
    """The environment's ``finalize``: whatever a template prints is escaped unless trusted."""
    if isinstance(value, MD):
        return value
    if value is None:
        return MD("")
    return MD.escape(value)


def translator(gettext, catalogue):
    """``_()`` for templates: a message of the catalogue is trusted Markdown in the page's language;
    anything else (``_(run.status)`` of a merged database) is foreign text and escaped."""

    def _(msg):
        if isinstance(msg, str) and not isinstance(msg, Markup) and msg in catalogue:
            return MD(gettext(msg))
        return esc(msg)

    return _


# -- the Jinja environment -------------------------------------------------


class _Macro(jinja2.runtime.Macro):
    """A macro's output is its template text plus finalized values: trusted, so ``MD``."""

    def _invoke(self, arguments, autoescape):
        rv = super()._invoke(arguments, autoescape)
        return MD(rv) if autoescape else rv


def _plain_join(seq) -> str:
    # "a ~ b" yields plain text, escaped when printed: concatenation never vouches for its parts
    return "".join(map(str, seq))


class _Template(jinja2.Template):
    @classmethod
    def _from_namespace(cls, environment, namespace, globals):
        # The compiled template wraps macro bodies, {% set %} blocks and "~" in markupsafe.Markup,
        # which only HTML-escapes what is mixed in. Here they make MD or plain text instead.
        namespace.update(Markup=MD, Macro=_Macro, markup_join=_plain_join)
        return super()._from_namespace(environment, namespace, globals)


def markdown_environment(loader: jinja2.BaseLoader, **options) -> jinja2.Environment:
    """A Jinja environment for Markdown pages in which every printed value is escaped unless ``MD``.

    Filters: ``esc`` (inline text), ``code`` (code span), ``fenced`` (code block), ``anchor``
    (id/fragment), ``join`` (items escaped), ``redact_campaign`` (secrets out of a campaign
    file), ``source_name`` (a log source by its file's name); ``e``/``escape`` are ``esc``;
    ``safe`` does not exist (trusted Markdown is made in Python, as ``MD``). Globals: ``yaml_title``
    for front matter, ``frozen_campaign`` (a campaign text whole, with what was masked in it). The page environment (``report/render.py``) adds ``said`` and ``end_reason``
    from ``report/observations.py``, which sits above this module (it renders with its escapers), and
    ``difference`` (what differs between two runs, ``report/history/conditions.py``).
    """
    env = jinja2.Environment(loader=loader, autoescape=True, finalize=finalize, **options)
    env.template_class = _Template
    env.filters.pop("safe", None)
    env.filters.update({"esc": esc, "e": esc, "escape": esc, "forceescape": esc, "code": code_span,
                        "fenced": fenced, "anchor": anchor, "join": join, "redact_campaign": redact_campaign_text,
                        "source_name": source_name})
    env.globals["yaml_title"] = yaml_title
    env.globals["frozen_campaign"] = frozen_campaign
    return env
