"""The site's title and description come from the project's site.toml, in both languages.

Real parts: a real (empty) store, the real ``cardproof report build`` command
with ``mkdocs build --strict`` and the scaffold's plugins; the built HTML is
read as a browser gets it.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import open_store


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
