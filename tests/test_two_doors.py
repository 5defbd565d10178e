"""Capture and publish meet at two doors: report/ imports from daemon/ only the store and the campaign.

The store package owns the schema, the file, JSON columns and the read-side statistics (and the one
write the publish side makes, a publication); the campaign package owns the campaign as parsed when
a run froze it and the capture side's reading of its own rows (``campaign/evidence.py``). The CLI
(``cardproof/commands``) imports both halves and neither half imports it. Every import counts, late
or under TYPE_CHECKING; imports are read by Python's parser, nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"daemon": "cardproof.daemon", "report": "cardproof.report"}
DOORS = ("cardproof.daemon.store", "cardproof.daemon.campaign")


def _module(path: Path, folder: str) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join([PACKAGES[folder]] + (parts[:-1] if is_pkg else parts)), is_pkg


def imported(path: Path, folder: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``path``, relative ones resolved; ``from a import b`` as ``a.b``."""
    name, is_pkg = _module(path, folder)
    out = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = ".".join(here + ([node.module] if node.module else []))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _through_a_door(module: str) -> bool:
    return any(module == d or module.startswith(d + ".") for d in DOORS)


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _files("report"), ids=lambda p: str(p.relative_to(ROOT)))
def test_report_imports_from_daemon_only_the_store_and_the_campaign(path):
    side_doors = [f"line {n}: {m}" for n, m in imported(path, "report")
                  if (m == "cardproof.daemon" or m.startswith("cardproof.daemon.")) and not _through_a_door(m)]
    assert not side_doors, (f"{path.relative_to(ROOT)} reaches into daemon/ past the store and the campaign: "
                            f"{side_doors} (read it through daemon/store/ or daemon/campaign/evidence.py)")


@pytest.mark.parametrize("path", _files("report") + _files("daemon"), ids=lambda p: str(p.relative_to(ROOT)))
def test_neither_half_imports_the_command_line(path):
    folder = path.relative_to(ROOT).parts[0]
    upward = [f"line {n}: {m}" for n, m in imported(path, folder)
              if m.startswith(("cardproof.commands", "cardproof.cli"))]
    assert not upward, f"{path.relative_to(ROOT)} imports the CLI: {upward}"


def test_the_checker_sees_every_form_of_import(tmp_path, monkeypatch):
    """Relative, late and TYPE_CHECKING imports are all seen, so each of them can fail the tests above."""
    pkg = tmp_path / "report" / "sub"
    pkg.mkdir(parents=True)
    f = pkg / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cardproof.daemon.memory import host\n"
                 "def g():\n    from ...daemon.run import judge\n    import cardproof.commands.run\n"
                 "from ...daemon.store import json_value\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    found = [m for _, m in imported(f, "report")]
    assert "cardproof.daemon.memory.host" in found and "cardproof.daemon.run.judge" in found
    assert "cardproof.commands.run" in found
    assert [m for m in found if m.startswith("cardproof.daemon") and not _through_a_door(m)] == [
        "cardproof.daemon.memory.host", "cardproof.daemon.run.judge"]
