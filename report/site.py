"""The MkDocs project around the articles: its scaffold and the site build."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path


class ReportError(Exception):
    """The site could not be built; the message says which step and why."""


def scaffold(project: Path) -> None:
    """Give ``project`` an mkdocs.yml and hand-written pages if it has none."""
    project.mkdir(parents=True, exist_ok=True)
    src = resources.files("cardproof.report") / "scaffold"
    if not (project / "mkdocs.yml").exists():
        (project / "mkdocs.yml").write_text((src / "mkdocs.yml").read_text())
    site = project / "site"
    site.mkdir(exist_ok=True)
    for name in ("index.md", "index.de.md"):
        if not (site / name).exists():
            (site / name).write_text((src / name).read_text())
    # Ours, not the author's: always the current copies (mkdocs.yml names the hooks; the hooks give the
    # feed plugin the template beside them). Outside docs_dir: not published.
    (project / ".cardproof").mkdir(exist_ok=True)
    for name in ("mkdocs_hooks.py", "feed_rss.xml"):
        dst = project / ".cardproof" / name
        text = (src / name).read_text()
        if not dst.exists() or dst.read_text() != text:
            dst.write_text(text)
    for name in ("iframe-worker.js", "cardproof.css"):
        dst = site / "assets" / "cardproof" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        text = (src / name).read_text()
        if not dst.exists() or dst.read_text() != text:
            dst.write_text(text)


def mkdocs_build(project: Path, *, full: bool = False) -> Path:
    """``mkdocs build --strict``, of the changed pages only where that is safe (report/site_build.py);
    raises ReportError with mkdocs' own complaint. ``full`` forces a build of every page."""
    project = Path(project).resolve()
    proc = subprocess.run(
        [sys.executable, "-m", "cardproof.report.site_build", str(project), *(["--full"] if full else [])],
        cwd=project,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "WARNING" in ln or "ERROR" in ln]
        detail = "; ".join(lines[:5]) or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReportError(f"mkdocs build --strict failed: {detail}")
    out = project / "build" / "site"
    # static-i18n gives Material per-page alternate links, and Material's
    # language selector fetches sitemap.xml relative to them; without a copy
    # beside each page every switch logs a 404 in the reader's console.
    sitemap = out / "sitemap.xml"
    if sitemap.exists():
        data = sitemap.read_bytes()
        for folder in {page.parent for page in out.rglob("*.html")}:
            dst = folder / "sitemap.xml"
            # a partial build leaves the copies of the last one: refresh those that differ
            if dst != sitemap and (not dst.exists() or dst.read_bytes() != data):
                dst.write_bytes(data)
    return out


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless the file already holds it; True when written (an unchanged page keeps
    its file time, so the site build and the incremental report see it as unchanged)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    path.write_text(text, encoding="utf-8")
    return True
