"""The site's title and description come from the project's site.toml, in both languages.

Real parts: a real (empty) store, the real ``cardproof report build`` command
with ``mkdocs build --strict`` and the scaffold's plugins; the built HTML is
read as a browser gets it.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store
from site_html import pages, read

# Every value breaks out of an attribute, names an entity or looks like a template; none has < or >
# (refused, below), so each reaches the theme.
HOSTILE = {
    "title": """x" onmouseover="alert(7)" y="z & Tom's `{{ 7*7 }}` {% raw %}""",
    "title_de": """Tom & Jerry's "Karten" &amp; &lt;b&gt; {{ 7*7 }}""",
    "description": "d' onfocus='alert(1)' autofocus x='",
    "description_de": '" autofocus onfocus="alert(2)" data-pwn="',
}
#: the attributes Material gives its logo link; anything more was made by a value
LOGO_ATTRS = {"href", "title", "class", "aria-label", "data-md-component"}


@pytest.fixture
def empty_db(tmp_path):
    open_store(tmp_path / "e.db").close()
    return tmp_path / "e.db"


def _build(db, project):
    return CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])


def _head(page):
    html = page.read_text()
    return (re.search(r"<title>([^<]*)</title>", html).group(1),
            re.search(r'<meta name="description" content="([^"]*)"', html).group(1))


def test_title_and_description_per_language_from_site_toml(empty_db, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "site.toml").write_text('[site]\ntitle = "Lab cards"\ntitle_de = "Karten im Labor"\n'
                                       'description = "What our cards do"\ndescription_de = "Was unsere Karten tun"\n')
    result = _build(empty_db, project)
    assert result.exit_code == 0, result.output
    site = project / "build" / "site"
    en_title, en_desc = _head(site / "index.html")
    de_title, de_desc = _head(site / "de" / "index.html")
    assert en_title.endswith("Lab cards") and en_desc == "What our cards do"
    assert de_title.endswith("Karten im Labor") and de_desc == "Was unsere Karten tun"
    assert "Lab cards" not in (site / "de" / "index.html").read_text()


def test_without_site_toml_cardproofs_own_wording_in_each_language(empty_db, tmp_path):
    result = _build(empty_db, tmp_path / "p")
    assert result.exit_code == 0, result.output
    site = tmp_path / "p" / "build" / "site"
    assert _head(site / "index.html")[0].endswith("cardproof results")
    assert _head(site / "de" / "index.html")[0].endswith("cardproof-Ergebnisse")
    assert _head(site / "de" / "index.html")[1].startswith("Messungen lokaler LLM-Inferenzserver")


@pytest.mark.parametrize("text, named", [
    ('[site]\ntitle = "<script>alert(1)</script>"\n', "site.title"),
    ('[site]\ntitel = "Tippfehler"\n', "site.titel"),
    ('[site]\ntitle = ""\n', "site.title"),
    ('[site]\ndescription_de = "zwei\\nZeilen"\n', "site.description_de"),
    ('[site]\ntitle = 5\n', "site.title"),
    ('[site]\ntitle = "x" * 2\n', "site.toml"),  # not TOML
    ('site = "x"\n', "site"),
    ('[website]\ntitle = "x"\n', "website"),
    ('[site]\ntitle = "' + "x" * 121 + '"\n', "site.title"),
    # no XML document may hold U+FFFE or U+FFFF (the feed's title and description are these values: both feeds
    # were invalid XML); C1 controls and the bidirectional overrides that make a title read backwards
    ('[site]\ntitle = "A\\uFFFFB"\n', "site.title"), ('[site]\ndescription = "A\\uFFFEB"\n', "site.description"),
    ('[site]\ntitle_de = "A\\u0085B"\n', "site.title_de"), ('[site]\ntitle = "abc\\u202Egpj.exe"\n', "site.title"),
    ('[site]\ndescription_de = "A\\u2066B"\n', "site.description_de"),
])
def test_a_bad_site_toml_is_refused_in_one_line_and_nothing_is_built(empty_db, tmp_path, text, named):
    project = tmp_path / "p"
    project.mkdir()
    (project / "site.toml").write_text(text)
    result = _build(empty_db, project)
    assert result.exit_code != 0
    line = result.output.strip()
    assert "\n" not in line and "site.toml" in line and named in line, line
    assert not (project / "build").exists() and not (project / "mkdocs.yml").exists()


def _site_toml(values: dict[str, str]) -> str:
    # JSON's string escapes are TOML's (\\", \\\\, \\uXXXX): the file holds the values exactly
    return "[site]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    """One site built from a store with no runs and the HOSTILE site.toml, with a site URL (canonical links)."""
    root = tmp_path_factory.mktemp("hostile-settings")
    open_store(root / "e.db").close()
    (root / "p").mkdir()
    (root / "p" / "site.toml").write_text(_site_toml(HOSTILE))
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(root / "e.db"), "--project", str(root / "p"),
                                      "--site-url", "https://lab.example.org/results/"])
    assert result.exit_code == 0, result.output
    return root / "p" / "build" / "site"


def test_site_toml_values_reach_every_page_as_text_never_as_markup(hostile_site):
    """Issue: a quote in the title became an onmouseover attribute of every page's logo, and `&` reached
    <title> raw. Read as a browser's tokenizer reads them, the values are each exactly the text given."""
    site_pages = pages(hostile_site)
    assert len(site_pages) >= 6
    logos = 0
    for page in site_pages:
        html = read(page)
        german = dict(html.elements[0][1]).get("lang") == "de"  # the 404 page is the last language's
        title = HOSTILE["title_de" if german else "title"]
        description = HOSTILE["description_de" if german else "description"]
        for tag, attrs in html.elements:
            names = [name for name, _ in attrs]
            assert not [n for n in names if n.startswith("on") or n in ("autofocus", "data-pwn", "y", "x")], \
                (page, tag, attrs)
            if tag == "a" and "md-logo" in (dict(attrs).get("class") or ""):
                assert set(names) == LOGO_ATTRS, (page, attrs)
                assert dict(attrs)["aria-label"] == title and dict(attrs)["title"] == title, (page, attrs)
                logos += 1
            if tag == "meta" and dict(attrs).get("name") == "description":
                assert dict(attrs)["content"] == description, (page, attrs)
        assert html.title.endswith(title), (page, html.title)
        raw_title = re.search(r"<title>(.*?)</title>", page.read_text(), re.S).group(1)
        assert not re.search(r"&(?!amp;|#\d+;|#x[0-9a-fA-F]+;|quot;|lt;|gt;)", raw_title), (page, raw_title)
        assert "49" not in html.title  # {{ 7*7 }} shown, never evaluated
    assert logos >= 2 * (len(site_pages) - 1)  # header and drawer on every page


def test_site_toml_values_yaml_would_read_as_numbers_or_truths_stay_text(empty_db, tmp_path):
    """mkdocs.yml reads the values through !ENV, which types a bare 2024 as a number and On as true:
    the build failed ("Expected type str but received int") or lost the value."""
    project = tmp_path / "p"
    project.mkdir()
    values = {"title": "2024", "title_de": "On", "description": "1.5", "description_de": "null"}
    (project / "site.toml").write_text(_site_toml(values))
    result = _build(empty_db, project)
    assert result.exit_code == 0, result.output
    site = project / "build" / "site"
    assert _head(site / "index.html") == ("2024", "1.5")
    de_title, de_desc = _head(site / "de" / "index.html")
    assert de_title.endswith(" - On") and de_desc == "null"
