"""Escaping by construction, without a browser: every foreign value is text in every Markdown context.

The Markdown is rendered by the real Python-Markdown with the extensions of
the scaffold's mkdocs.yml (what ``mkdocs build`` uses), and the HTML is
parsed to find any element or attribute a payload could have made.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import jinja2
import markdown
import pytest
import yaml
from mkdocs.utils.yaml import yaml_load

from cardproof.report.build import _cellvalue, render_caveat
from cardproof.report.caveats import Caveat, exception_rate
from cardproof.report.i18n import CATALOGUE, Lang
from cardproof.report.mdsafe import (MAX_SHOWN_CHARS, MD, anchor, code_span, esc, fenced, markdown_environment,
                                     publishable, publishing, translator, yaml_title)
from cardproof.report.stats import spread
from hostile_data import PAYLOADS

MORE = ["<!--", "-->", "<![CDATA[x", "<?php x ?>", "<div>", "</td></tr></table><script>1</script>", "a\\", "\\<b>",
        "`", "``", "\u2028<b>x</b>", "\x85<b>x</b>", "*", "_", "[", "|", "\\|", "<span id='q'>", "\x1e<x>",
        "\t\tcode", "    code", "[x]: javascript:alert(1)", "[y][x]", "---", "- item", "+ item", "1. item", "12) item",
        "=====", "~~~", "??? note", "!!! note", "> quote", "# h", "{#id}", "{: .c }", "[TOC]", "&amp;", "&#60;b&#62;"]
ALL = PAYLOADS + MORE


def _markdown() -> markdown.Markdown:
    # mkdocs' own loader: the scaffold uses its !ENV tag (site URL and feed switch)
    cfg = yaml_load((resources.files("cardproof.report") / "scaffold" / "mkdocs.yml").read_text())
    names, configs = [], {}
    for ext in cfg["markdown_extensions"]:
        if isinstance(ext, dict):
            (name, conf), = ext.items()
            names.append(name)
            configs[name] = conf
        else:
            names.append(ext)
    return markdown.Markdown(extensions=names, extension_configs=configs)


class _Elements(HTMLParser):
    """Every start tag with its attributes, in order."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict]]:
    p = _Elements()
    p.feed(html)
    return p.tags


def _page(value) -> str:
    """One Markdown document with the foreign value in every context the templates use."""
    e, c = esc(value), code_span(value)
    multi = fenced(f"{value}\nline two\n```\n</details><script>x</script>", "toml", 4)
    return f"""# Run 1 · {e}

{e} starts a paragraph, and [{e}](#cell-1) is link text.

!!! warning "{e}"
    {e} in an admonition

| a | b |
|---|---|
| {e} | {c} |
| {c} | {e} |

- <span id="line-1"></span>`1` {e}
- {c} after a code span

### {e} {{#load-1}}

??? info "{e}"
{multi}

**{e}** closing [link](#x) <span id="end"></span>
"""


# The template's own elements, in order (spans left out: the fenced block is highlighted into spans).
STRUCTURE = ["h1", "a", "p", "a", "div", "p", "p", "table", "thead", "tr", "th", "th", "tbody", "tr", "td", "td",
             "code", "tr", "td", "code", "td", "ul", "li", "code", "li", "code", "h3", "a", "details", "summary", "div",
             "pre", "code", "p", "strong", "a"]


@pytest.mark.parametrize("value", ALL, ids=range(len(ALL)))
def test_every_payload_stays_text_in_every_markdown_context(value):
    html = _markdown().convert(_page(value))
    tags = _tags(html)
    assert [t for t, _ in tags if t != "span"] == STRUCTURE, (value, html)
    assert ("span", {"id": "end"}) in tags
    # MkDocs finds a page's anchors by reading its raw Markdown with an HTML parser (--strict checks
    # every link against them): no value may hide the ids after it (an unclosed "<!--", a "<script>")
    from mkdocs.structure.pages import _RawHTMLPreprocessor

    raw = _RawHTMLPreprocessor()
    raw.run(_page(value).split("\n"))
    assert {"line-1", "end"} <= raw.present_anchor_ids, value
    for tag, attrs in tags:
        for name, v in attrs.items():
            assert not name.startswith("on"), (value, tag, name)
            assert not (v or "").strip().lower().startswith("javascript"), (value, tag, name, v)
        assert "data-pwn" not in attrs and attrs.get("id") != "q", (value, tag, attrs)


def test_every_printed_value_is_escaped_without_a_filter():
    """A forgotten |esc, a concatenation, a join, a macro or a translation never lets markup through."""
    env = markdown_environment(jinja2.DictLoader({"t": (
        "{%- macro m(v) -%}({{ v }}){%- endmacro -%}"
        "A {{ x }}|B {{ x ~ '!' }}|C {{ [x, 'y'] | join(', ') }}|D {{ x | e }}|E {{ m(x) }}|F {{ m(x) + x }}"
        "|G {{ _(x) }}|H {{ _('Run') }}|I {% set s %}({{ x }}){% endset %}{{ s }}|J {{ x | truncate(20) }}"
        "|K {{ m(x) | replace('(', x) }}|L {{ '%s' | format(x) }}|M {{ x | code }}|N {{ n }}")}))
    x = "<img src=x onerror=alert(1)> *[a](javascript:x)*"
    out, code = env.get_template("t").render(x=x, n=None, _=translator(Lang("de").gettext, CATALOGUE)).split("|M ")
    # a code span shows the text verbatim (Markdown escapes it; a word joiner keeps "<img" from
    # reading as a tag to MkDocs' anchor scan); None prints nothing
    assert code == "`" + x.replace("<", "<\u2060") + "`|N "
    assert "<" not in out and not re.search(r"(?<!\\)[\[\]*]", out), out  # no tag, link or emphasis left
    assert "H Lauf|" in out  # a catalogue message is trusted and translated
    assert out.count("&lt;img src=x onerror=alert(1)&gt; \\*\\[a\\](javascript:x)\\*") >= 10
    with pytest.raises(jinja2.TemplateAssertionError):
        env.from_string("{{ x | safe }}")


def test_catalogue_messages_are_trusted_and_data_is_not():
    _ = translator(Lang("en").gettext, CATALOGUE)
    assert isinstance(_("Run"), MD) and _("Run") == "Run"
    assert _("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert _(None) == ""


def test_python_helpers_escape_what_they_mix_in():
    L = Lang("en")
    gate = "<img src=x onerror=alert(1)>|`x`"
    cell = {"id": 7, "decode": None, "errors": [], "excluded": [{"excluded_by": [gate]}]}
    out = _cellvalue(L, cell)
    assert isinstance(out, MD) and "<img" not in out and "\\|\\`x\\`" in out and out.startswith('<span id="fig-cell-7"></span>[excluded](#cell-7)')
    ok = _cellvalue(L, {"id": 3, "decode": spread([1.0, 2.0, 3.0]), "errors": [], "excluded": []})
    assert ok == '<span id="fig-cell-3"></span>[2.0](#cell-3)<br><small>1.0–3.0 · n=3</small>'
    c = Caveat("x", "warning", exception_rate.TITLE, exception_rate.TEXT,
               {"model": "\n# MDH <script>x</script>", "cls": "<b>short</b>", "failed": ("int", 2), "total": ("int", 2),
                "kind": ("code", "[k](javascript:1)"), "text": ("quoted", "http://u:pw@10.1.2.3/x")})
    r = render_caveat(c, Lang("de"))
    assert isinstance(r["text"], MD) and "<script>" not in r["text"] and "<b>" not in r["text"]
    assert "`[k](javascript:1)`" in r["text"] and "pw@" not in r["text"] and "<q>http://10.1.2.x" in r["text"]
    assert r["text"].startswith("\\# MDH")  # the line break is gone, the heading marker escaped


def test_code_span_and_fence_cannot_be_closed_by_the_text():
    assert code_span("a`b") == "``a`b``"
    assert code_span("```") == "```` ``` ````"
    text = "x = 1\n```\n````\n<script>window.__pwned=1</script>\n~~~"
    html = _markdown().convert("??? info \"t\"\n" + str(fenced(text, "toml", 4)) + "\n\nafter\n")
    assert html.count("<pre") == 1 and "<script>" not in html
    assert html.rstrip().endswith("<p>after</p>")
    assert fenced("a\nb", "toml; <x>", 2) == "  ```tomlx\n  a\n  b\n  ```"  # the language is a name, nothing else


def test_yaml_title_is_one_scalar_of_escaped_text():
    for name in ['a "quoted" name', "two\nlines: yes\ntitle: injected", "</title><script>x</script>", "\x7f\x85\ud800x",
                 "'single' & <b>", "---\nfoo: bar", "{{ 7*7 }}"]:
        front = yaml.safe_load(f"title: {yaml_title('Run', 1, '·', name)}\n")
        assert list(front) == ["title"], name
        assert front["title"].startswith("Run 1 · ")
        assert "<" not in front["title"] and "\n" not in front["title"], front


def test_anchor_keeps_plain_names_and_slugs_anything_else():
    assert anchor("tools") == "tools" and anchor("sample-12") == "sample-12"
    a, b = anchor('x" onmouseover="alert(1)'), anchor('x" onmouseover="alert(1)')
    assert a == b and re.fullmatch(r"[a-z0-9-]+", a) and a != anchor("x onmouseover alert 1")
    assert re.fullmatch(r"x-[0-9a-f]{8}", anchor("<>"))


def test_long_text_is_cut_with_a_note_and_control_characters_are_shown_as_replacement():
    out = publishable("A" * (MAX_SHOWN_CHARS + 5000))
    assert out.startswith("A" * MAX_SHOWN_CHARS) and out.endswith("[+5000 characters not shown]")
    assert publishable("a\x00b\x02c\x1b\u202ed") == "a\ufffdb\ufffdc\ufffd\ufffdd"
    assert "\n" not in esc("a\nb\rc\u2028d") and "\t" not in esc("a\tb")


def test_addresses_are_masked_unless_the_build_opts_out():
    line = "request from 192.168.1.5:5123 and [2001:db8::7]:80, server http://u:pw@127.0.0.1:8080"
    assert esc(line) == "request from 192.168.1.x:5123 and \\[2001:0db8:0000:x\\]:80, server http://127.0.0.1:8080"
    with publishing(show_addresses=True):
        shown = esc(line)
    assert "192.168.1.5" in shown and "2001:db8::7" in shown and "pw@" not in shown  # the opt-out is for addresses only
    assert "192.168.1.5" not in esc(line)  # and it ends with the block


def test_templates_print_no_value_inside_a_literal_code_span():
    """A value between literal backticks would show its escapes: |code builds the span instead."""
    root = Path(__file__).resolve().parent.parent / "report" / "templates"
    found = [(p.name, m.group(0)) for p in root.rglob("*.j2") for m in re.finditer(r"`\{\{[^`]*\}\}`", p.read_text())]
    assert not found, found


def test_the_escape_memo_keeps_short_texts_only_and_gives_what_escaping_gives():
    """Each short foreign text is escaped once per process (a log line in both languages); a long one is not
    kept (the memo would hold it alive), and either way the result is what escaping the text gives."""
    from cardproof.report import mdsafe

    mdsafe._ESCAPED.clear()
    short, long_ = "**x** from 192.168.7.9", "*" * (mdsafe._ESCAPED_CHARS + 1)
    first = mdsafe.esc(short)
    assert mdsafe.esc(short) == first == mdsafe._escape_once(short) and len(mdsafe._ESCAPED) == 1
    assert "192.168.7.9" not in first
    assert mdsafe.esc(long_) == mdsafe._escape_once(long_) and len(mdsafe._ESCAPED) == 1
    with mdsafe.publishing(show_addresses=True):
        assert "192.168.7.9" in mdsafe.esc(short)  # the opt-out is part of the key
    assert len(mdsafe._ESCAPED) == 2


def test_numbers_are_kept_by_their_type_in_the_memo():
    """A table prints thousands of numbers: each is escaped once, and 1, 1.0 and True (equal to a dict)
    each keep their own text."""
    from cardproof.report import mdsafe

    mdsafe._ESCAPED.clear()
    assert [mdsafe.esc(v) for v in (1, 1.0, True, 1, 1.0, -0.5)] == ["1", "1.0", "True", "1", "1.0", "-0.5"]
    assert len(mdsafe._ESCAPED) == 3  # 1, 1.0 and -0.5; True is not kept
