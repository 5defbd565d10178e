"""The site's title and description in both languages, from the project's ``site.toml``.

    [site]
    title = "Inference on the lab's cards"
    title_de = "Inferenz auf den Karten des Labors"
    description = "..."
    description_de = "..."

Every key is optional (cardproof's own wording stands in). The values reach
MkDocs through the environment its config reads (``!ENV`` in the scaffold's
mkdocs.yml), so an author's own mkdocs.yml is never rewritten. A bad file is
refused in one line naming the file and the key; nothing is built from it.

The environment holds each value as HTML text (``&``, quotes escaped): MkDocs
and Material print the site name and description into the page unescaped
(the logo's ``aria-label``, ``<title>``, the description meta), so a quote in
a title would otherwise end the attribute. The site's hooks
(``scaffold/mkdocs_hooks.py``) hand the theme that text as markup, and the
feed the plain text again.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import tomllib
from pathlib import Path

import yaml

FILE = "site.toml"
#: key -> the environment variable mkdocs.yml reads it from
ENV = {"title": "CARDPROOF_SITE_NAME", "title_de": "CARDPROOF_SITE_NAME_DE",
       "description": "CARDPROOF_SITE_DESCRIPTION", "description_de": "CARDPROOF_SITE_DESCRIPTION_DE"}
_MAX_CHARS = {"title": 120, "title_de": 120, "description": 400, "description_de": 400}
# MkDocs and Material print the site name and description as they are (no HTML escaping),
# and one line each: markup and line breaks are refused rather than published. So are the characters
# the report shows no foreign text with (report/mdsafe.py's _UNPRINTABLE): C0 and C1 controls, lone
# surrogates, the bidirectional overrides and isolates that make a title read backwards, and U+FFFE and
# U+FFFF, which no XML document may hold (the feed's title and description are these values)
_BAD = re.compile(r"[<>\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\u202a-\u202e\u2066-\u2069\ufffe\uffff]")


class SiteSettingsError(ValueError):
    """site.toml cannot be used; the message names the file and the key."""


def read_site_settings(project: Path) -> dict[str, str]:
    """The ``[site]`` values of ``project/site.toml`` (none when there is no such file)."""
    path = Path(project) / FILE
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SiteSettingsError(f"{path}: {exc}") from exc
    unknown = sorted(set(data) - {"site"})
    if unknown:
        raise SiteSettingsError(f"{path}: unknown table or key {unknown[0]!r} (only [site] is read)")
    site = data.get("site", {})
    if not isinstance(site, dict):
        raise SiteSettingsError(f"{path}: site: a table is needed ([site])")
    out = {}
    for key, value in site.items():
        if key not in ENV:
            raise SiteSettingsError(f"{path}: site.{key}: unknown key (known: {', '.join(ENV)})")
        if not isinstance(value, str) or not value.strip():
            raise SiteSettingsError(f"{path}: site.{key}: a non-empty text is needed")
        if _BAD.search(value):
            raise SiteSettingsError(f"{path}: site.{key}: no markup (< >), no line breaks and no control "
                                    f"characters (U+{ord(_BAD.search(value).group()):04X})")
        if len(value) > _MAX_CHARS[key]:
            raise SiteSettingsError(f"{path}: site.{key}: longer than {_MAX_CHARS[key]} characters")
        out[key] = value.strip()
    return out


def environment_text(value: str) -> str:
    """``value`` as the environment hands it to mkdocs.yml: HTML text, and never a YAML number or truth.

    ``!ENV`` reads a variable's text as a plain YAML scalar, so a title ``2024`` would reach MkDocs as a
    number, ``yes`` as true and ``null`` as nothing, and the build fail or lose it. Writing the first
    character as a character reference keeps such a value text, and the page shows it unchanged.
    """
    text = html.escape(value, quote=True)
    if yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False)) != "tag:yaml.org,2002:str":
        text = f"&#{ord(text[0])};{text[1:]}"
    return text


@contextlib.contextmanager
def site_environment(settings: dict[str, str]):
    """The environment the mkdocs run reads the title and description from (restored after)."""
    old = {var: os.environ.get(var) for var in ENV.values()}
    for var in ENV.values():
        os.environ.pop(var, None)
    os.environ.update({ENV[k]: environment_text(v) for k, v in settings.items()})
    try:
        yield
    finally:
        for var, value in old.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
