"""The code says its reasons in place or cites a file a reader has.

A comment that cites "issue 17" of a tracker the reader cannot see, or a
DESIGN.md that is not in the repository, sends a newcomer nowhere. Other
projects' issues (``ggml-org/llama.cpp issue #24183``, ``ollama issue 630``)
are where a log line or a crash came from, and stay.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the product and its tests, benchmarks and scripts; the German catalogue's translator comments are the
#: catalogue's own (report/locale), and fixture files are third-party text quoted as it was
SCANNED = ("cardproof", "daemon", "report", "tests", "scripts", "bench")
SUFFIXES = {".py", ".j2", ".css", ".toml", ".sh", ".cfg", ".ini"}
_ISSUE = re.compile(r"(?<![\w-])issues?[ -]?#?\d+", re.IGNORECASE)
#: another project's tracker, named right before the number: owner/repo or a project's name
_OTHERS = re.compile(r"(?:[\w.-]+/[\w.-]+|llama\.cpp|ik_llama\.cpp|ollama|shimmy)(?:'s)?\s*$", re.IGNORECASE)
_DESIGN = re.compile(r"\bDESIGN(?:\.md|'s)", re.IGNORECASE)


def citations(text: str) -> list[str]:
    """The citations of this project's tracker or of DESIGN.md in ``text``, as ``line: text``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in _ISSUE.finditer(line):
            if not _OTHERS.search(line[:m.start()]):
                found.append(f"{n}: {m.group(0)}")
        found += [f"{n}: {m.group(0)}" for m in _DESIGN.finditer(line)]
    return found


def _files():
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and "fixtures" not in path.parts \
                    and "locale" not in path.parts and path.name != Path(__file__).name:
                yield path
    yield ROOT / "pyproject.toml"


def test_no_code_cites_an_issue_number_or_a_missing_design_file():
    files = list(_files())
    assert len(files) > 200  # the scan reaches the product, not an empty folder
    found = [f"{p.relative_to(ROOT)}:{c}" for p in files for c in citations(p.read_text(encoding="utf-8"))]
    assert found == []


@pytest.mark.parametrize("text, bad", [
    ("# log evidence (issue 4)", True),
    ('"""Issue 16 item 11: a hostile file."""', True),
    ("a verdict from DESIGN.md's vocabulary", True),
    ("the facts the issue-4 parsers produce", True),
    ("# partial offload (ggml-org/llama.cpp issue #24183)", False),
    ("# journalctl's pager cut the line short: ollama/ollama issue 630", False),
    ("ik_llama.cpp issue 503: the log starts with the user's command", False),
    ('"ik-llama-issue503-zsh-segfault.log"', False),
    ("# the parsers' issue: a line cut short", False),
])
def test_the_scan_tells_this_trackers_citations_from_other_projects(text, bad):
    assert bool(citations(text)) is bad
