"""A finding in a page's language: its sentences with the locale's numbers, each figure linked to its row.

Messages come from the catalogue (trusted Markdown); every value is escaped
on its way in (``MD.format``), a model's name like any text from a store.
``plain`` gives the words a publication records, as text: an addendum
escapes what it quotes.
"""

from __future__ import annotations

import re

from ..i18n import CATALOGUE, Lang
from ..mdsafe import MD, esc, translator
from ..observations import quoted
from .base import BILLION, LIMIT, MILLION, SECTION, WHY, Fig, Finding, Line, Quote, Term

#: the anchors a figure may link to: the article's own (fig-load, fit) and the evidence page's
_ANCHOR = re.compile(r"(?:cell|step|sample|line|load|fig-load|fit)-\d+")


class _Say:
    """One way of saying findings: Markdown for a page (``links``: figures linked), or plain text for a
    publication's record, which an addendum escapes when it quotes it (so it must not be escaped twice)."""

    def __init__(self, L: Lang, *, markdown: bool = True, links: bool = True):
        self.L, self.markdown, self.links = L, markdown, links and markdown
        self.gettext = translator(L.gettext, CATALOGUE) if markdown else L.gettext

    def fig(self, f: Fig):
        L, v = self.L, f.value
        if f.kind == "ratio":
            text = "×" + L.num(v, 2)
        elif f.kind == "signed_pct":
            text = L.signed_pct(v, f.digits)
        elif f.kind == "pct":
            text = L.pct(v, f.digits)
        elif f.kind == "mib":
            text = f"{L.num(v / 1024, 2)} GiB" if isinstance(v, (int, float)) and v >= 1024 else \
                f"{L.num(v, f.digits)} MiB"
        elif f.kind == "params":
            big = isinstance(v, (int, float)) and v >= 1e9
            text = L.gettext(BILLION if big else MILLION).format(
                n=L.num(v / 1e9 if big else v / 1e6, 1 if big else 0) if isinstance(v, (int, float)) else "—")
        elif f.kind == "seconds":
            text = f"{L.num(v, f.digits)} s"
        elif f.kind == "int":
            text = L.num(v, 0)
        else:
            text = L.num(v, f.digits)
        if self.links and f.link and _ANCHOR.fullmatch(f.link):
            return MD("[{}](#{})").format(text, MD(f.link))
        return text  # figures are ours: digits, separators and units, nothing to escape

    def value(self, v):
        if isinstance(v, Fig):
            return self.fig(v)
        if isinstance(v, Term):
            return self.gettext(v.msgid)
        if isinstance(v, Quote):
            return quoted(v.text) if self.markdown else self.L.quote(v.text)
        if isinstance(v, Line):  # a clause of its own (a list item that is a sentence part)
            return self.line(v)
        if isinstance(v, (list, tuple)):
            parts = [self.value(x) for x in v]
            sep = "; " if any(isinstance(x, Line) for x in v) else ", "  # clauses have commas of their own
            return MD(sep).join(parts) if self.markdown else sep.join(map(str, parts))
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, (int, float)):
            return self.L.num(v, 0 if isinstance(v, int) else 1)
        return "—" if v is None else str(v)  # text from data: escaped by MD.format on a page

    def line(self, line: Line):
        params = {k: self.value(v) for k, v in line.params.items()}
        if isinstance(line.text, tuple):  # a count meets a noun: the form for it in this language
            n = line.params.get(line.count)
            form = self.L.plural(line.text, n.value if isinstance(n, Fig) else n)
            if self.markdown:
                text = MD(form) if line.text[0] in CATALOGUE else esc(form)
            else:
                text = form
            return text.format(**params)
        return self.gettext(line.text).format(**params)

    def finding(self, f: Finding) -> dict:
        return {"rule": f.rule, "key": f.key, "title": self.line(Line(f.title, f.params)),
                "text": self.line(Line(f.text, f.params, f.count)), "figures": [self.line(x) for x in f.figures],
                "condition": self.line(f.condition), "caveat": self.line(f.caveat)}


def render(f: Finding, L: Lang, *, links: bool = True) -> dict:
    """``title``, ``text``, ``figures``, ``condition``, ``caveat`` of ``f`` in ``L``'s language (``MD``)."""
    return _Say(L, links=links).finding(f)


def rendered(findings: list[Finding], L: Lang) -> list[dict]:
    say = _Say(L)
    return [say.finding(f) for f in findings]


def plain(f: Finding, L: Lang) -> str:
    """The finding as one plain text, as a publication records it (an addendum quotes it, escaped then)."""
    r = _Say(L, markdown=False).finding(f)
    return (f"{r['title']}: {r['text']} {'; '.join(r['figures'])}. {L.gettext(WHY)} {r['condition']} "
            f"{L.gettext(LIMIT)} {r['caveat']}")


def published(findings: list[Finding]) -> dict[str, dict]:
    """Each finding as a publication records it (report/statements.py): ``<rule>|<key>`` -> its words.

    ``shown`` is what readers saw in each language (its English text is what is compared: a finding
    whose figures or wording a later build changes, that it no longer states or newly states, gets an
    addendum), ``label`` its title, so an addendum quotes the published finding in both languages.
    The findings are the article's own (``views.ArticleView.findings``).
    """
    from ..i18n import LANGUAGES

    out = {}
    for f in findings:
        out[f.key] = {
            "label": {lang: f"{Lang(lang).gettext(SECTION)}: {_Say(Lang(lang), markdown=False).finding(f)['title']}"
                      for lang in LANGUAGES},
            "shown": {lang: plain(f, Lang(lang)) for lang in LANGUAGES},
        }
    return out
