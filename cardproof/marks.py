"""``N_``: the mark that puts a constant into the message catalogue without translating it.

A text defined where no language is known yet (a gate's description, a
finding rule's message ids, a status word stored with a row) is written in
English inside ``N_("...")`` so that ``python scripts/catalogue.py`` (Babel's
extractor) finds it; the page that shows it translates it with
``Lang.gettext`` or the template's ``_()``. Lives at the package's root so the
capture side can mark its texts without importing the report.
"""


def N_(message: str) -> str:
    """``message`` unchanged: a marker for the extractor."""
    return message


def NP_(singular: str, plural: str) -> tuple[str, str]:
    """``(singular, plural)`` unchanged: a marker for a count's two forms, chosen by ``Lang.ngettext``."""
    return singular, plural


def extract_python(fileobj, keywords, comment_tags, options):
    """Babel's Python extractor, plus the marked calls inside f-strings (``f"{_('Addenda')} ..."``),
    which Babel reads as one opaque string token on this Python: babel.cfg names this function."""
    import ast

    from babel.messages.extract import extract_python as babel_python

    source = fileobj.read()
    fileobj.seek(0)
    yield from babel_python(fileobj, keywords, comment_tags, options)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    seen: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call) or id(call) in seen:
                continue
            seen.add(id(call))
            name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
            if name in keywords:
                args = tuple(a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None
                             for a in call.args)
                if any(a is not None for a in args):
                    yield call.lineno, name, args if len(args) > 1 else args[0], []


def extract_toml(fileobj, keywords, comment_tags, options):
    """The English texts of an authored TOML register (daemon/probes/defects.toml): every string
    value of the keys named in babel.cfg's ``keys`` option (comma-separated) is a msgid."""
    import tomllib

    keys = {k.strip() for k in options.get("keys", "").split(",") if k.strip()}
    data = tomllib.loads(fileobj.read().decode("utf-8"))
    for entries in data.values():
        for entry in entries if isinstance(entries, list) else [entries]:
            for key in sorted(keys & set(entry)):
                if isinstance(entry[key], str):
                    yield 0, None, entry[key], []
