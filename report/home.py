"""The home page's generated part: the latest headline per campaign, the runs, the comparisons.

The page itself is the author's (``site/index.md``, ``index.de.md``); only the
text between ``<!-- cardproof:generated -->`` and ``<!-- /cardproof:generated -->``
is rewritten. A page without the markers is left as it is.
"""

from __future__ import annotations

from pathlib import Path

START = "<!-- cardproof:generated -->"
END = "<!-- /cardproof:generated -->"


def splice(page: str, generated: str) -> str | None:
    """``page`` with the generated part replaced; None when the page has no (well-ordered) markers."""
    a = page.find(START)
    b = page.find(END, a + len(START)) if a >= 0 else -1
    if a < 0 or b < 0:
        return None
    return page[:a + len(START)] + "\n" + generated.strip() + "\n" + page[b:]


def latest_per_campaign(runs: list[dict]) -> list[dict]:
    """The newest finished run of each campaign (``runs`` newest first)."""
    seen: dict[str, dict] = {}
    for r in runs:
        if r["status"] == "completed" and r["campaign_name"] not in seen:
            seen[r["campaign_name"]] = r
    return list(seen.values())


def write_home(site: Path, render) -> list[Path]:
    """Rewrite the generated part of each language's home page; ``render(lang)`` gives the Markdown."""
    written = []
    for lang, name in (("en", "index.md"), ("de", "index.de.md")):
        path = site / name
        if not path.exists():
            continue
        page = path.read_text(encoding="utf-8")
        new = splice(page, render(lang))
        if new is not None and new != page:  # an unchanged page keeps its file time (the site build skips it)
            path.write_text(new, encoding="utf-8")
            written.append(path)
    return written
